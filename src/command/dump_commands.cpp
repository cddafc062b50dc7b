// DUMP, RESTORE (and RESTORE-ASKING, what MIGRATE sends in cluster mode) and
// MIGRATE, with Redis 7's semantics and texts. The payload is bloomery's own
// (persist/dump_payload.hpp, proto/dump.md): a filter as a snapshot stores
// it, in Redis's DUMP shape, so it moves between bloomery servers and is
// refused by Redis, and Redis's by bloomery, as a version mismatch.

#include <algorithm>
#include <limits>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "args.hpp"
#include "bloomery/bloom/bounds.hpp"
#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/persist/dump_payload.hpp"
#include "common.hpp"
#include "families.hpp"
#include "new_filter.hpp"

namespace bloomery::command {
namespace {

void append_length_line(std::string& out, char type, std::uint64_t length) {
    out += type;
    out += std::to_string(length);
    out += "\r\n";
}

void append_bulk(std::string& out, std::string_view bytes) {
    append_length_line(out, '$', bytes.size());
    out.append(bytes);
    out += "\r\n";
}

// DUMP key: the payload as a bulk string, nil if the key is missing. The
// payload is written straight into the reply (no second copy of a large
// filter), its size known before a byte of it is: the layers are read once.
void cmd_dump(Context& ctx, Args argv) {
    // A reference, not a lookup's epoch: encoding a large filter takes a
    // while, and no writer should wait for it.
    const std::optional<store::KeySnapshot> entry = ctx.keyspace.get(argv[1]);
    if (!entry) {
        ctx.out.null();
        return;
    }
    const bloom::ScalableFilter& filter = *entry->filter;
    const std::size_t layers = filter.num_layers();
    const std::uint64_t bytes = persist::dump_payload_bytes(filter, layers);
    // What no server could RESTORE is not made: the bound of every
    // argument a client may send (and of the reply it would take).
    if (bytes > ctx.config.proto_max_bulk_len) {
        ctx.out.error(errors::kDumpTooLarge);
        return;
    }
    std::string& out = ctx.out.buffer();
    append_length_line(out, '$', bytes);
    persist::append_dump_payload(filter, layers, out);
    out += "\r\n";
}

// RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds]
// [FREQ frequency], checked in Redis's order: options, BUSYKEY, the TTL, the
// payload's version and checksum, its content; then bloomery's bounds on
// the filter it describes (as BF.LOADCHUNK's header).
void cmd_restore(Context& ctx, Args argv) {
    bool replace = false;
    bool absolute_ttl = false;
    std::int64_t idle_seconds = -1;
    std::int64_t frequency = -1;
    for (std::size_t j = 4; j < argv.size(); ++j) {
        const bool has_value = j + 1 < argv.size();
        if (iequals(argv[j], "REPLACE")) {
            replace = true;
        } else if (iequals(argv[j], "ABSTTL")) {
            absolute_ttl = true;
        } else if (iequals(argv[j], "IDLETIME") && has_value && frequency == -1) {
            if (!parse_int64(argv[j + 1], idle_seconds)) {
                ctx.out.error(errors::kNotInteger);
                return;
            }
            if (idle_seconds < 0) {
                ctx.out.error(errors::kInvalidIdletime);
                return;
            }
            ++j;
        } else if (iequals(argv[j], "FREQ") && has_value && idle_seconds == -1) {
            if (!parse_int64(argv[j + 1], frequency)) {
                ctx.out.error(errors::kNotInteger);
                return;
            }
            if (frequency < 0 || frequency > 255) {
                ctx.out.error(errors::kInvalidFreq);
                return;
            }
            ++j;
        } else {
            ctx.out.error(errors::kSyntax);
            return;
        }
    }
    const std::string_view key = argv[1];
    if (!replace && ctx.keyspace.contains(key)) {
        ctx.out.error(errors::kBusyKey);
        return;
    }
    std::int64_t ttl;
    if (!parse_int64(argv[2], ttl)) {
        ctx.out.error(errors::kNotInteger);
        return;
    }
    if (ttl < 0) {
        ctx.out.error(errors::kInvalidTtl);
        return;
    }
    const std::string_view payload = argv[3];
    if (!persist::verify_dump_payload(payload)) {
        ctx.out.error(errors::kBadDumpPayload);
        return;
    }
    const core::Result<persist::DumpValue> parsed = persist::parse_dump_value(payload);
    if (!parsed) {
        ctx.out.error(errors::kBadDataFormat);
        return;
    }
    const persist::DumpValue& value = *parsed;
    core::Result<bloom::FilterRef> filter = build_new_filter(
        ctx, value.layers, [&] { return persist::build_dump_filter(value, ctx.config.maxmemory); });
    if (!filter) {
        ctx.out.error(filter.error());
        return;
    }
    const std::int64_t now = store::now_ms();
    std::int64_t deadline = ttl;
    if (ttl != 0 && !absolute_ttl) {
        deadline = ttl > std::numeric_limits<std::int64_t>::max() - now
                       ? std::numeric_limits<std::int64_t>::max()
                       : ttl + now;
    }
    if (deadline != 0 && deadline <= now) {
        // Already expired: nothing is created, and REPLACE deletes what
        // was there (Redis: a DEL).
        if (replace && ctx.keyspace.erase(key)) WorkerStats::bump(ctx.stats.changes);
        ctx.out.ok();
        return;
    }
    // IDLETIME sets the access clock back (OBJECT IDLETIME), FREQ the use
    // counter (OBJECT FREQ); without them, as a new key's.
    if (!ctx.keyspace.restore(key, std::move(*filter), deadline, replace,
                              std::max<std::int64_t>(idle_seconds, 0),
                              frequency >= 0 ? static_cast<std::uint32_t>(frequency)
                                             : store::key_access::kInitialCount)) {
        ctx.out.error(errors::kBusyKey);  // created by another client meanwhile
        return;
    }
    WorkerStats::bump(ctx.stats.changes);
    ctx.out.ok();
}

// ---- MIGRATE ----

// MIGRATE's keys, as Redis's migrateGetKeys finds them: argument 3, or
// every argument after KEYS (none if argument 3 is not empty then: a
// syntax error the command reports). Options before KEYS are skipped with
// their values, so a password that reads "KEYS" is not taken for it.
KeyRange migrate_keys(Args argv) {
    const long argc = static_cast<long>(argv.size());
    for (long i = 6; i < argc; ++i) {
        const std::string_view word = argv[static_cast<std::size_t>(i)];
        if (iequals(word, "KEYS")) {
            if (!argv[3].empty()) return {};
            return {i + 1, argc - 1, 1};
        }
        if (iequals(word, "AUTH")) {
            i += 1;
        } else if (iequals(word, "AUTH2")) {
            i += 2;
        }
    }
    return {3, 3, 1};
}

// What one MIGRATE knows while its exchange runs (on the network layer's
// thread: restore_command and then the completion, one after the other).
struct Migration {
    store::Keyspace* keyspace;
    bool copy;
    bool replace;
    bool cluster;
    std::uint64_t max_payload;
    std::vector<std::string> keys;
    // What was sent for each key: the filter (held, so its address names
    // it until the end), its item count and layer count then.
    struct Sent {
        bloom::FilterRef filter;
        std::uint64_t items = 0;
        std::size_t layers = 0;
    };
    std::vector<Sent> sent;
    bool too_large = false;      // a key's payload passed proto-max-bulk-len: not sent
    bool out_of_memory = false;  // a key's payload could not be allocated: not sent

    // Key `index`'s RESTORE, with the TTL it has left, Redis's way: a key
    // past its deadline is not sent, one about to pass it gets 1 ms.
    bool restore_command(std::size_t index, std::string& command) {
        try {
            return make_restore(index, command);
        } catch (const std::bad_alloc&) {
        } catch (const std::length_error&) {
        }
        out_of_memory = true;
        command.clear();
        return false;
    }

    bool make_restore(std::size_t index, std::string& command) {
        const std::optional<store::KeySnapshot> entry = keyspace->get(keys[index]);
        if (!entry) return false;
        std::int64_t ttl = 0;
        if (entry->expire_at_ms != 0) {
            ttl = entry->expire_at_ms - store::now_ms();
            if (ttl < 0) return false;
            if (ttl < 1) ttl = 1;
        }
        const bloom::ScalableFilter& filter = *entry->filter;
        Sent record{entry->filter, 0, filter.num_layers()};
        // Counted before the payload copies the bits: an add after this is
        // seen as a change when the key is deleted.
        for (std::size_t i = 0; i < record.layers; ++i) record.items += filter.layer(i).items();
        const std::uint64_t bytes = persist::dump_payload_bytes(filter, record.layers);
        if (bytes > max_payload) {
            too_large = true;
            return false;
        }
        append_length_line(command, '*', replace ? 5 : 4);
        append_bulk(command, cluster ? "RESTORE-ASKING" : "RESTORE");
        append_bulk(command, keys[index]);
        append_bulk(command, std::to_string(ttl));
        append_length_line(command, '$', bytes);
        persist::append_dump_payload(filter, record.layers, command);
        command += "\r\n";
        if (replace) append_bulk(command, "REPLACE");
        sent[index] = std::move(record);
        return true;
    }
};

// MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE]
// [AUTH password] [AUTH2 username password] [KEYS key [key ...]]. The
// options and the keys are checked here; the exchange with the target runs
// on the network layer's thread (command/server.hpp: Migration) while this
// client waits (a deferred reply) and the worker serves the others. Each
// key's payload is made when it is about to be sent, so one MIGRATE holds
// one payload at a time. Keys the target took are deleted here unless COPY,
// each only if it is unchanged since it was sent: a key that took adds
// meanwhile is kept (and the reply says so) rather than lose them.
void cmd_migrate(With<uses::Migration>& ctx, Args argv) {
    bool copy = false;
    bool replace = false;
    MigrateRequest request;
    std::size_t first_key = 3;
    std::size_t num_keys = 1;
    for (std::size_t j = 6; j < argv.size(); ++j) {
        const std::size_t more = argv.size() - 1 - j;
        if (iequals(argv[j], "COPY")) {
            copy = true;
        } else if (iequals(argv[j], "REPLACE")) {
            replace = true;
        } else if (iequals(argv[j], "AUTH")) {
            if (more < 1) {
                ctx.out.error(errors::kSyntax);
                return;
            }
            request.auth = true;
            request.password.assign(argv[++j]);
        } else if (iequals(argv[j], "AUTH2")) {
            if (more < 2) {
                ctx.out.error(errors::kSyntax);
                return;
            }
            request.auth = true;
            request.username.assign(argv[++j]);
            request.password.assign(argv[++j]);
        } else if (iequals(argv[j], "KEYS")) {
            if (!argv[3].empty()) {
                ctx.out.error(errors::kMigrateKeysWithKey);
                return;
            }
            first_key = j + 1;
            num_keys = argv.size() - j - 1;
            break;
        } else {
            ctx.out.error(errors::kSyntax);
            return;
        }
    }
    std::int64_t timeout_ms;
    std::int64_t db;
    if (!parse_int64(argv[5], timeout_ms) || !parse_int64(argv[4], db)) {
        ctx.out.error(errors::kNotInteger);
        return;
    }
    if (timeout_ms <= 0) timeout_ms = 1000;

    auto migration = std::make_shared<Migration>();
    migration->keyspace = &ctx.keyspace;
    migration->copy = copy;
    migration->replace = replace;
    migration->cluster = ctx.config.cluster_enabled;
    migration->max_payload = ctx.config.proto_max_bulk_len;
    // Keys missing now are not sent; if all are, there is nothing to do
    // (Redis answers NOKEY: often a key that just expired, not an error).
    for (std::size_t i = 0; i < num_keys; ++i) {
        const std::string_view key = argv[first_key + i];
        if (ctx.keyspace.contains(key)) migration->keys.emplace_back(key);
    }
    if (migration->keys.empty()) {
        ctx.out.simple("NOKEY");
        return;
    }
    migration->sent.resize(migration->keys.size());

    // A port that is no port is a target that cannot be reached, as Redis
    // (atoi) finds it.
    std::int64_t port = 0;
    if (!parse_int64(argv[2], port) || port < 1 || port > 65535) {
        ctx.out.error(errors::kMigrateConnect);
        return;
    }
    const DeferredReply reply = ctx.defer_reply();
    if (!reply) {
        ctx.out.error(errors::kCannotWait);
        return;
    }
    request.host.assign(argv[1]);
    request.port = static_cast<std::uint16_t>(port);
    request.timeout_ms = timeout_ms;
    request.db = db;
    request.keys = migration->keys.size();
    request.restore_command = [migration](std::size_t index, std::string& command) {
        return migration->restore_command(index, command);
    };
    WorkerStats* stats = &ctx.stats;
    ctx.server.migration.migrate(
        std::move(request), [migration, reply, stats](MigrateResult result) {
            std::uint64_t deleted = 0;
            bool changed = false;
            if (!migration->copy) {
                for (const std::size_t index : result.accepted) {
                    const Migration::Sent& sent = migration->sent[index];
                    switch (migration->keyspace->erase_if_unchanged(
                        migration->keys[index], sent.filter.get(), sent.items, sent.layers)) {
                        case store::Keyspace::EraseIf::erased:
                            ++deleted;
                            break;
                        case store::Keyspace::EraseIf::gone:
                            break;
                        case store::Keyspace::EraseIf::changed:
                            changed = true;
                            break;
                    }
                }
            }
            // Redis's precedence: the target's error, then an I/O error; then
            // bloomery's own.
            std::string error;
            if (!result.target_error.empty()) {
                error = std::string(errors::kMigrateTargetError) + result.target_error;
            } else if (result.failure == MigrateResult::Failure::connect) {
                error = errors::kMigrateConnect;
            } else if (result.failure == MigrateResult::Failure::write) {
                error = errors::kMigrateWrite;
            } else if (result.failure == MigrateResult::Failure::read) {
                error = errors::kMigrateRead;
            } else if (migration->too_large) {
                error = errors::kDumpTooLarge;
            } else if (migration->out_of_memory) {
                error = errors::kNoMemory;
            } else if (changed) {
                error = errors::kMigrateKeyChanged;
            }
            // The client's connection runs this on its worker thread, the only
            // writer of `stats`.
            reply.complete([error = std::move(error), deleted, stats](resp::Writer& out) {
                if (deleted != 0) WorkerStats::bump(stats->changes, deleted);
                if (error.empty()) {
                    out.ok();
                } else {
                    out.error(error);
                }
            });
        });
}

}  // namespace

void register_dump_commands(Registry& registry) {
    registry.register_handler<cmd_dump>("dump");
    registry.register_handler<cmd_restore>("restore");
    registry.register_handler<cmd_restore>("restore-asking");
    registry.register_handler<cmd_migrate>("migrate");
    registry.register_key_finder("migrate", migrate_keys);
}

}  // namespace bloomery::command
