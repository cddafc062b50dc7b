// Replication commands: REPLICAOF (SLAVEOF), REPLCONF, PSYNC, WAIT, ROLE.
// The work is the network layer's (net/replication.hpp), reached through the
// command layer's Replication interface (command/server.hpp); these parse,
// check and reply. proto/replication.md describes the protocol between a
// primary and its replicas.

#include <optional>
#include <string>

#include "args.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/core/printable.hpp"
#include "families.hpp"

namespace bloomery::command {
namespace {

// Whether this server is a replica now (writes come from its primary only).
bool is_replica(const ReplicaGate& gate) {
    return (gate.replication_flags.load(std::memory_order_relaxed) &
            command::kReplicationReplica) != 0;
}

// REPLICAOF's target: a primary's address, or none (NO ONE: an empty host).
struct PrimaryAddress {
    std::string host;
    std::uint16_t port = 0;
};

core::Result<PrimaryAddress> parse_primary(Args argv) {
    if (ArgCursor no_one(argv); no_one.eat("no") && no_one.eat("one")) return PrimaryAddress{};
    ArgCursor args(argv);
    const std::string_view host = args.next();
    const core::Result<std::int64_t> port = args.take_int(errors::kInvalidMasterPort);
    if (!port) return port.failure();
    if (*port < 1 || *port > 65535) return core::Error{std::string(errors::kInvalidMasterPort)};
    return PrimaryAddress{std::string(host), static_cast<std::uint16_t>(*port)};
}

// REPLICAOF host port | NO ONE. The network layer never waits for the link
// it replaces to stop on this thread (a snapshot load can take seconds); for
// NO ONE the reply comes once writes are taken.
void cmd_replicaof(With<uses::Replication>& ctx, Args argv) {
    // A node's role comes from the slot map: following another primary would
    // drop the slots this node serves (Redis refuses it likewise).
    if (ctx.config.cluster_enabled) return ctx.out.error(errors::kReplicaofInCluster);
    const core::Result<PrimaryAddress> primary = parse_primary(argv);
    if (!primary) return ctx.out.error(primary.error());
    const DeferredReply reply = ctx.defer_reply();
    if (!reply) return ctx.out.error(errors::kCannotWait);
    ctx.server.replication.replicaof(primary->host, primary->port, [reply](std::string error) {
        reply.complete([error = std::move(error)](resp::Writer& out) {
            if (error.empty()) {
                out.ok();
            } else {
                out.error(error);
            }
        });
    });
}

// REPLCONF option value [option value ...]: what a replica tells its primary.
// ACK carries no reply (it arrives on the replica's feed, whose other
// direction is the stream); the rest answer OK.
void cmd_replconf(Context& ctx, Args argv) {
    ArgCursor args(argv);
    if (args.remaining() % 2 != 0) return ctx.out.error(errors::kSyntax);
    while (args.has_next()) {
        if (args.eat("ack")) {
            const std::optional<std::int64_t> offset = args.next_int();
            if (!offset || *offset < 0) return;  // ignored, as Redis does
            ctx.client.replica_ack_offset.store(static_cast<std::uint64_t>(*offset),
                                                std::memory_order_relaxed);
            ctx.client.replica_ack_ms.store(store::now_ms(), std::memory_order_relaxed);
            return;
        }
        if (args.eat("listening-port")) {
            const std::optional<std::int64_t> port = args.next_int();
            if (!port || *port < 0 || *port > 65535) return ctx.out.error(errors::kNotInteger);
            ctx.client.replica_listening_port.store(static_cast<std::uint16_t>(*port),
                                                    std::memory_order_relaxed);
        } else if (args.eat_one_of({"capa", "ip-address", "getack"})) {
            args.next();  // accepted, nothing to keep
        } else {
            std::string message(errors::kUnknownReplconfOption);
            core::append_printable(message, args.next());
            return ctx.out.error(message);
        }
    }
    ctx.out.ok();
}

// PSYNC replid offset: the connection becomes this replica's feed after the
// batch of replies it is in; the network layer answers +FULLRESYNC or
// +CONTINUE and streams (proto/replication.md). "?" -1 asks for a full one.
void cmd_psync(With<uses::Gate, uses::Persistence>& ctx, Args argv) {
    if (ctx.server.persistence.journal() == nullptr) {
        return ctx.out.error(errors::kReplicationNeedsJournal);
    }
    if (is_replica(ctx.server.gate)) return ctx.out.error(errors::kNoChainedReplication);
    ArgCursor args(argv);
    const std::string_view replid = args.next();
    const core::Result<std::int64_t> offset = args.take_int(errors::kNotInteger);
    if (!offset) return ctx.out.error(offset.error());
    if (ctx.suspender == nullptr) return ctx.out.error(errors::kCannotWait);
    ctx.client.psync_requested = true;
    ctx.client.psync_replid.assign(replid);
    ctx.client.psync_offset = *offset;
}

// WAIT numreplicas timeout: how many replicas acknowledged every write made
// before it, waiting up to timeout ms (0: no limit) for `numreplicas`.
void cmd_wait(With<uses::Gate, uses::Replication>& ctx, Args argv) {
    ArgCursor args(argv);
    const std::optional<std::int64_t> count = args.next_int();
    const std::optional<std::int64_t> timeout = args.next_int();
    if (!count || !timeout) return ctx.out.error(errors::kNotInteger);
    if (*timeout < 0) return ctx.out.error(errors::kTimeoutNegative);
    if (is_replica(ctx.server.gate)) return ctx.out.error(errors::kWaitOnReplica);
    if (ctx.deny_blocking) {
        // Inside EXEC nothing waits: the count now, as Redis answers there.
        std::int64_t acked = 0;
        ctx.server.replication.wait_for_replicas(0, 0, [&acked](std::int64_t n) { acked = n; });
        return ctx.out.integer(acked);
    }
    DeferredReply reply = ctx.defer_reply();
    if (!reply) return ctx.out.error(errors::kCannotWait);
    ctx.server.replication.wait_for_replicas(*count, *timeout, [reply](std::int64_t acked) {
        reply.complete([acked](resp::Writer& out) { out.integer(acked); });
    });
}

// ROLE: ["master", offset, [[ip, port, offset], ...]] or
// ["slave", host, port, state, offset], as Redis.
void cmd_role(With<uses::Replication>& ctx, Args) {
    const command::ReplicationInfo info = ctx.server.replication.replication();
    if (!info.replica) {
        ctx.out.array(3);
        ctx.out.bulk("master");
        ctx.out.integer(static_cast<std::int64_t>(info.offset));
        ctx.out.array(info.replicas.size());
        for (const command::ReplicaInfo& replica : info.replicas) {
            ctx.out.array(3);
            ctx.out.bulk(replica.ip);
            ctx.out.bulk(std::to_string(replica.port));
            ctx.out.bulk(std::to_string(replica.offset));
        }
        return;
    }
    ctx.out.array(5);
    ctx.out.bulk("slave");
    ctx.out.bulk(info.primary_host);
    ctx.out.integer(info.primary_port);
    ctx.out.bulk(info.link_up ? "connected" : info.sync_in_progress ? "sync" : "connect");
    ctx.out.integer(static_cast<std::int64_t>(info.offset));
}

}  // namespace

void register_replication_commands(Registry& registry) {
    registry.register_handler<cmd_replicaof>("replicaof");
    registry.register_handler<cmd_replicaof>("slaveof");
    registry.register_handler<cmd_replconf>("replconf");
    registry.register_handler<cmd_psync>("psync");
    registry.register_handler<cmd_wait>("wait");
    registry.register_handler<cmd_role>("role");
}

}  // namespace bloomery::command
