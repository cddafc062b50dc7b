#pragma once
// The cluster slot check dispatch runs before a command in cluster mode
// (defined in cluster_commands.cpp, beside the CLUSTER commands).

#include "bloomery/command/context.hpp"

namespace bloomery::command {

struct CommandSpec;

// True if this node runs `spec` with `argv`: it names no key, its keys'
// slot is this node's (or this replica's primary's, for a read after
// READONLY), or the client sent ASKING just before. Otherwise writes
// -CROSSSLOT (keys in several slots) or -MOVED <slot> <host:port> and returns
// false. Allocates nothing. Call only when ctx.config.cluster_enabled.
bool cluster_admits(const CommandSpec& spec, Context& ctx, Args argv);

// The same for EXEC: the keys of every queued command must lie in one slot
// this node serves (as Redis's getNodeByQuery over a transaction). Writes the
// redirection or -CROSSSLOT and returns false otherwise.
bool cluster_admits_transaction(Context& ctx);

}  // namespace bloomery::command
