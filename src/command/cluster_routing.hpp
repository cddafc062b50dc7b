#pragma once
// The cluster slot check dispatch runs before a command in cluster mode
// (cluster_routing.cpp), and what the CLUSTER commands share.

#include "bloomery/command/context.hpp"
#include "bloomery/command/errors.hpp"

namespace bloomery::command {

struct CommandSpec;

// True if this node runs `spec` with `argv`: it names no key, or its keys'
// slot is served here as Redis decides (getNodeByQuery): this node owns the
// slot; or it is importing the slot and the client sent ASKING just before;
// or it is a replica of the slot's owner and the client reads after
// READONLY. Otherwise writes the answer and returns false: -CROSSSLOT (keys
// of several slots), -MOVED <slot> <host:port>, -ASK <slot> <host:port> (the
// slot is migrating and a key is not here), -TRYAGAIN (a migrating or
// importing slot holds some of the keys, not all), -CLUSTERDOWN (the slot
// is unassigned, or the cluster is down). Allocates nothing on a map
// without open slots. Call only when ctx.config.cluster_enabled.
bool cluster_admits(const CommandSpec& spec, DispatchContext& ctx, Args argv);

// The same for EXEC: the keys of every queued command must lie in one slot
// this node serves (as Redis's getNodeByQuery over a transaction). Writes the
// redirection or -CROSSSLOT and returns false otherwise.
bool cluster_admits_transaction(DispatchContext& ctx);

// CLUSTER's subcommands, READONLY, READWRITE and ASKING are registered
// through this: outside cluster mode they answer that cluster support is
// disabled, as Redis's do, and their handlers do not run.
template <class View, void (*Handler)(View&, Args)>
void cluster_only(View& ctx, Args argv) {
    if (!ctx.config.cluster_enabled) return ctx.out.error(errors::kClusterDisabled);
    Handler(ctx, argv);
}

}  // namespace bloomery::command
