// Replication commands: REPLICAOF (SLAVEOF), REPLCONF, PSYNC, WAIT, ROLE.
// The work is the network layer's (net/replication.hpp), reached through the
// command layer's Replication interface (command/server.hpp); these parse,
// check and reply. proto/replication.md describes the protocol between a
// primary and its replicas.

#include <string>

#include "args.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/core/printable.hpp"
#include "families.hpp"

namespace bloomery::command {
namespace {

// REPLICAOF host port | NO ONE. The network layer never waits for the link
// it replaces to stop on this thread (a snapshot load can take seconds); for
// NO ONE the reply comes once writes are taken.
void cmd_replicaof(With<uses::Replication>& ctx, Args argv) {
    // A node's role comes from the slot map: following another primary would
    // drop the slots this node serves (Redis refuses it likewise).
    if (ctx.config.cluster_enabled) {
        ctx.out.error(errors::kReplicaofInCluster);
        return;
    }
    std::string host;
    std::int64_t port = 0;
    if (!(iequals(argv[1], "no") && iequals(argv[2], "one"))) {
        if (!parse_int64(argv[2], port) || port < 1 || port > 65535) {
            ctx.out.error(errors::kInvalidMasterPort);
            return;
        }
        host.assign(argv[1]);
    }
    const DeferredReply reply = ctx.defer_reply();
    if (!reply) {
        ctx.out.error(errors::kCannotWait);
        return;
    }
    ctx.server.replication.replicaof(
        host, static_cast<std::uint16_t>(port), [reply](std::string error) {
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
    if (argv.size() % 2 == 0) {
        ctx.out.error(errors::kSyntax);
        return;
    }
    for (std::size_t i = 1; i + 1 < argv.size(); i += 2) {
        const std::string_view option = argv[i];
        const std::string_view value = argv[i + 1];
        if (iequals(option, "ack")) {
            std::int64_t offset = 0;
            if (!parse_int64(value, offset) || offset < 0) return;  // ignored, as Redis does
            ctx.client.replica_ack_offset.store(static_cast<std::uint64_t>(offset),
                                                std::memory_order_relaxed);
            ctx.client.replica_ack_ms.store(store::now_ms(), std::memory_order_relaxed);
            return;
        }
        if (iequals(option, "listening-port")) {
            std::int64_t port = 0;
            if (!parse_int64(value, port) || port < 0 || port > 65535) {
                ctx.out.error(errors::kNotInteger);
                return;
            }
            ctx.client.replica_listening_port.store(static_cast<std::uint16_t>(port),
                                                    std::memory_order_relaxed);
        } else if (!iequals(option, "capa") && !iequals(option, "ip-address") &&
                   !iequals(option, "getack")) {
            std::string message = "ERR Unrecognized REPLCONF option: ";
            core::append_printable(message, option);
            ctx.out.error(message);
            return;
        }
    }
    ctx.out.ok();
}

// PSYNC replid offset: the connection becomes this replica's feed after the
// batch of replies it is in; the network layer answers +FULLRESYNC or
// +CONTINUE and streams (proto/replication.md). "?" -1 asks for a full one.
void cmd_psync(With<uses::Gate, uses::Persistence>& ctx, Args argv) {
    if (ctx.server.persistence.journal() == nullptr) {
        ctx.out.error(errors::kReplicationNeedsJournal);
        return;
    }
    if ((ctx.server.gate.replication_flags.load(std::memory_order_relaxed) &
         command::kReplicationReplica) != 0) {
        ctx.out.error(errors::kNoChainedReplication);
        return;
    }
    std::int64_t offset = -1;
    if (!parse_int64(argv[2], offset)) {
        ctx.out.error(errors::kNotInteger);
        return;
    }
    if (ctx.suspender == nullptr) {
        ctx.out.error(errors::kCannotWait);
        return;
    }
    ctx.client.psync_requested = true;
    ctx.client.psync_replid.assign(argv[1]);
    ctx.client.psync_offset = offset;
}

// WAIT numreplicas timeout: how many replicas acknowledged every write made
// before it, waiting up to timeout ms (0: no limit) for `numreplicas`.
void cmd_wait(With<uses::Gate, uses::Replication>& ctx, Args argv) {
    std::int64_t count = 0, timeout = 0;
    if (!parse_int64(argv[1], count) || !parse_int64(argv[2], timeout)) {
        ctx.out.error(errors::kNotInteger);
        return;
    }
    if (timeout < 0) {
        ctx.out.error(errors::kTimeoutNegative);
        return;
    }
    if ((ctx.server.gate.replication_flags.load(std::memory_order_relaxed) &
         command::kReplicationReplica) != 0) {
        ctx.out.error(errors::kWaitOnReplica);
        return;
    }
    if (ctx.deny_blocking) {
        // Inside EXEC nothing waits: the count now, as Redis answers there.
        std::int64_t acked = 0;
        ctx.server.replication.wait_for_replicas(0, 0, [&acked](std::int64_t n) { acked = n; });
        ctx.out.integer(acked);
        return;
    }
    DeferredReply reply = ctx.defer_reply();
    if (!reply) {
        ctx.out.error(errors::kCannotWait);
        return;
    }
    ctx.server.replication.wait_for_replicas(count, timeout, [reply](std::int64_t acked) {
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
