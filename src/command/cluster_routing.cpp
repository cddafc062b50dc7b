// The slot check dispatch runs before every command in cluster mode: where
// a command's keys are served, as Redis's getNodeByQuery decides it, read
// from the map as this node last saw it (cluster/cluster_state.hpp).

#include "cluster_routing.hpp"

#include <array>
#include <charconv>
#include <cstring>
#include <utility>
#include <vector>

#include "bloomery/cluster/cluster_state.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/core/key_slot.hpp"

namespace bloomery::command {
namespace {

// -MOVED <slot> <host>:<port> (or -ASK), written from a stack buffer: in a
// cluster a redirect is an ordinary reply (a client's first touch of every
// slot, and every command of a client that ignores the map), so it
// allocates nothing. Addresses are at most 253 + 1 + 5 bytes (topology.cpp
// bounds the host).
void reply_redirect(resp::Writer& out, std::string_view kind, std::uint16_t slot,
                    std::string_view address) {
    std::array<char, 300> buffer;
    char* at = buffer.data();
    std::memcpy(at, kind.data(), kind.size());
    at += kind.size();
    *at++ = ' ';
    at = std::to_chars(at, at + 8, slot).ptr;
    *at++ = ' ';
    const auto room = static_cast<std::size_t>(buffer.data() + buffer.size() - at);
    const std::size_t length = std::min(address.size(), room);
    std::memcpy(at, address.data(), length);
    at += length;
    out.error(std::string_view(buffer.data(), static_cast<std::size_t>(at - buffer.data())));
}

// The one slot of the keys seen so far (-1 before the first); add() is
// false for a key of another slot (Redis refuses keys of two slots even
// when one node owns both). `several` once two different key names were
// seen.
class CommonSlot {
public:
    bool add(std::string_view key) {
        const int slot = cluster::key_slot(key);
        if (slot_ < 0) {
            slot_ = slot;
            first_ = key;
        } else if (key != first_) {
            several_ = true;
        }
        return slot == slot_;
    }
    int slot() const { return slot_; }
    bool several() const { return several_; }

private:
    int slot_ = -1;
    std::string_view first_;
    bool several_ = false;
};

// What a command, or a transaction's commands together, may do with the
// keys of the slot they name.
enum class SlotUse { read, write };

struct Query {
    std::uint16_t slot = 0;
    SlotUse use = SlotUse::read;
    bool asking = false;   // ASKING came just before, or the command implies it
    bool migrate = false;  // MIGRATE: runs here while the slot is open
    bool several_keys = false;
    bool transaction = false;  // EXEC's queue: nothing of it can wait
};

// Of the keys a query names, whether some are here and some are not: asked
// only while the slot is migrating or importing.
struct Presence {
    bool present = false;
    bool missing = false;
    // A key MIGRATE is sending with its writes held (write_holds.hpp).
    std::string_view held;

    void add(const store::Keyspace& keyspace, const cluster::WriteHolds& holds,
             std::string_view key) {
        (keyspace.contains(key) ? present : missing) = true;
        if (holds.any() && holds.held(key)) held = key;
    }
};

// A write to a key that MIGRATE is sending with its writes held waits for
// the move: its reply is deferred, then -ASK to the target (the key went
// there: the client runs the write on it) or -TRYAGAIN (the key stayed).
// A transaction, or a write of several keys, is answered -TRYAGAIN at once.
void wait_for_move(DispatchContext& ctx, const Query& query, std::string_view key,
                   const std::string& target) {
    const DeferredReply reply =
        query.several_keys || query.transaction ? DeferredReply() : ctx.defer_reply();
    if (!reply) return ctx.out.error(errors::kTryAgain);
    const std::uint16_t slot = query.slot;
    const auto resume = [reply, slot, target](bool moved) {
        reply.complete([moved, slot, target](resp::Writer& out) {
            if (!moved) return out.error(errors::kTryAgain);
            reply_redirect(out, "ASK", slot, target);
        });
    };
    // The hold may have ended since the key was found held.
    if (!ctx.server.cluster.write_holds().wait_if_held(key, resume)) resume(false);
}

// A write served here needs this primary's lease (ClusterState's fencing):
// past its deadline another node may have taken the slots over.
bool writable(DispatchContext& ctx, const Query& query) {
    if (query.use == SlotUse::read || ctx.server.cluster.writes_allowed()) return true;
    ctx.out.error(errors::kClusterDown);
    return false;
}

// Redis's getNodeByQuery once the slot is known; `presence` is called only
// for a slot that is migrating or importing here.
template <class PresenceFn>
bool route(DispatchContext& ctx, const Query& query, PresenceFn&& presence) {
    const cluster::ClusterMap& map = ctx.server.cluster.view();
    const std::uint16_t owner = map.owner(query.slot);
    if (owner == cluster::kNoNode) {
        ctx.out.error(errors::kSlotNotServed);
        return false;
    }
    if (!map.state_ok()) {
        ctx.out.error(errors::kClusterDown);
        return false;
    }
    const std::uint16_t self = map.self_index();
    const std::uint16_t migrating = owner == self ? map.migrating_to(query.slot) : cluster::kNoNode;
    const std::uint16_t importing = map.importing_from(query.slot);
    if (migrating != cluster::kNoNode || importing != cluster::kNoNode) {
        if (query.migrate) return true;
        const Presence keys = presence();
        if (migrating != cluster::kNoNode && query.use == SlotUse::write && !keys.held.empty()) {
            wait_for_move(ctx, query, keys.held, map.node(migrating).address);
            return false;
        }
        if (migrating != cluster::kNoNode && keys.missing) {
            if (keys.present) {
                ctx.out.error(errors::kTryAgain);
            } else {
                reply_redirect(ctx.out, "ASK", query.slot, map.node(migrating).address);
            }
            return false;
        }
        if (importing != cluster::kNoNode && query.asking) {
            if (query.several_keys && keys.missing) {
                ctx.out.error(errors::kTryAgain);
                return false;
            }
            return writable(ctx, query);
        }
    }
    if (owner == self) return writable(ctx, query);
    // A replica serves reads of its primary's slots after READONLY (Redis's
    // rule: anything not flagged write; writes always go to the primary).
    if (ctx.client.cluster_readonly && query.use == SlotUse::read &&
        map.primary_of(self) == owner) {
        return true;
    }
    reply_redirect(ctx.out, "MOVED", query.slot, map.node(owner).address);
    return false;
}

// Whether ASKING came before this command. As in Redis, ASKING covers the
// next command run outside a transaction; sent before MULTI it covers the
// queued commands and EXEC (cmd_asking sets the flag again after this clears
// it for ASKING itself).
bool take_asking(DispatchContext& ctx, const CommandSpec& spec) {
    const bool asking = ctx.client.cluster_asking;
    const bool transaction = ctx.client.transaction.active || spec.name == "multi";
    if (!transaction || spec.name == "discard") ctx.client.cluster_asking = false;
    return asking;
}

}  // namespace

bool cluster_admits(const CommandSpec& spec, DispatchContext& ctx, Args argv) {
    // RESTORE-ASKING (what MIGRATE sends in cluster mode) implies ASKING.
    const bool asking = take_asking(ctx, spec) || spec.asking;
    // The positions Registry::key_positions lists (MIGRATE's after KEYS
    // included), walked without building its vector; each key hashed once.
    // A call without keys is never redirected.
    const KeyRange range = key_range(spec, argv);
    CommonSlot common;
    for (long position = range.first; position <= range.last; position += range.step) {
        if (!common.add(argv[static_cast<std::size_t>(position)])) {
            ctx.out.error(errors::kCrossSlot);
            return false;
        }
    }
    if (common.slot() < 0) return true;
    const Query query{.slot = static_cast<std::uint16_t>(common.slot()),
                      .use = spec.write ? SlotUse::write : SlotUse::read,
                      .asking = asking,
                      .migrate = spec.name == "migrate",
                      .several_keys = common.several()};
    return route(ctx, query, [&] {
        Presence keys;
        for (long position = range.first; position <= range.last; position += range.step) {
            keys.add(ctx.keyspace, ctx.server.cluster.write_holds(),
                     argv[static_cast<std::size_t>(position)]);
        }
        return keys;
    });
}

bool cluster_admits_transaction(DispatchContext& ctx) {
    const bool asking = std::exchange(ctx.client.cluster_asking, false);
    const TransactionState& transaction = ctx.client.transaction;
    CommonSlot common;
    SlotUse use = SlotUse::read;
    std::vector<std::string_view> keys;
    for (const TransactionState::Queued& queued : transaction.commands) {
        const CommandSpec& spec = *queued.spec;
        std::vector<std::string_view> argv;
        argv.reserve(queued.argument_count);
        for (std::uint32_t i = 0; i < queued.argument_count; ++i) {
            const auto& [offset, size] = transaction.arguments[queued.first_argument + i];
            argv.emplace_back(transaction.argument_bytes.data() + offset, size);
        }
        for (std::size_t position : Registry::key_positions(spec, argv)) {
            if (!common.add(argv[position])) {
                ctx.out.error(errors::kCrossSlot);
                return false;
            }
            keys.push_back(argv[position]);
            if (spec.write) use = SlotUse::write;
        }
    }
    if (common.slot() < 0) return true;
    const Query query{.slot = static_cast<std::uint16_t>(common.slot()),
                      .use = use,
                      .asking = asking,
                      .several_keys = common.several(),
                      .transaction = true};
    return route(ctx, query, [&] {
        Presence presence;
        for (const std::string_view key : keys) {
            presence.add(ctx.keyspace, ctx.server.cluster.write_holds(), key);
        }
        return presence;
    });
}

}  // namespace bloomery::command
