// DUMP, RESTORE (and RESTORE-ASKING, what MIGRATE sends in cluster mode) and
// MIGRATE, with Redis 7's semantics and texts. The payload is bloomery's own
// (persist/dump_payload.hpp, proto/dump.md): a filter as a snapshot stores
// it, in Redis's DUMP shape, so it moves between bloomery servers and is
// refused by Redis, and Redis's by bloomery, as a version mismatch.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "args.hpp"
#include "bloomery/bloom/bounds.hpp"
#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/cluster/cluster_state.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/persist/dump_payload.hpp"
#include "cf_family.hpp"
#include "common.hpp"
#include "families.hpp"
#include "new_filter.hpp"
#include "resp_text.hpp"

namespace bloomery::command {
namespace {

// DUMP key: the payload as a bulk string, nil if the key is missing. The
// payload is written straight into the reply (no second copy of a large
// filter), then its length line put in front of it: the layers are read once.
void cmd_dump(Context& ctx, Args argv) {
    // A reference, not a lookup's epoch: encoding a large filter takes a
    // while, and no writer should wait for it.
    const std::optional<store::KeySnapshot> entry = ctx.keyspace.get(argv[1]);
    if (!entry) {
        ctx.out.null();
        return;
    }
    if (entry->value.age_or_null() != nullptr) {
        ctx.out.error(errors::kExpiringUnsupported);  // BF.SCANDUMP carries them
        return;
    }
    if (const cuckoo::CuckooObject* object = entry->value.cuckoo_or_null()) {
        const std::string payload = persist::cuckoo_dump_payload(object->copy().filter);
        if (payload.size() > ctx.config.proto_max_bulk_len) {
            ctx.out.error(errors::kDumpTooLarge);
        } else {
            ctx.out.bulk(payload);
        }
        return;
    }
    const bloom::ScalableFilter& filter = entry->value.filter();
    // A counting filter's cells and counts as of one moment.
    const std::unique_lock serial = filter.serialize_changes();
    const std::size_t layers = filter.num_layers();
    std::string& out = ctx.out.buffer();
    const std::size_t start = out.size();
    // What no server could RESTORE is not made: the bound of every
    // argument a client may send (and of the reply it would take).
    if (!persist::append_dump_payload(filter, layers, out, ctx.config.proto_max_bulk_len)) {
        ctx.out.error(errors::kDumpTooLarge);
        return;
    }
    insert_length_line(out, start);
    out += "\r\n";
}

// RESTORE's options after the payload, as Redis 7 reads them: REPLACE,
// ABSTTL, and one of IDLETIME seconds and FREQ frequency.
struct RestoreOptions {
    IfExists if_exists = IfExists::keep;
    TimeBase ttl_base = TimeBase::from_now;  // ABSTTL: the TTL is a Unix time in ms
    std::int64_t idle_seconds = -1;          // IDLETIME; -1: not given
    std::int64_t frequency = -1;             // FREQ; -1: not given
};

core::Result<RestoreOptions> parse_restore_options(Args argv) {
    RestoreOptions options;
    ArgCursor args(argv, 4);
    while (args.has_next()) {
        const bool has_value = args.remaining() >= 2;
        if (args.eat("REPLACE")) {
            options.if_exists = IfExists::replace;
        } else if (args.eat("ABSTTL")) {
            options.ttl_base = TimeBase::unix_time;
        } else if (has_value && options.frequency == -1 && args.eat("IDLETIME")) {
            const core::Result<std::int64_t> idle = args.take_int(errors::kNotInteger);
            if (!idle) return idle.failure();
            if (*idle < 0) return refuse(errors::kInvalidIdletime);
            options.idle_seconds = *idle;
        } else if (has_value && options.idle_seconds == -1 && args.eat("FREQ")) {
            const core::Result<std::int64_t> frequency = args.take_int(errors::kNotInteger);
            if (!frequency) return frequency.failure();
            if (*frequency < 0 || *frequency > 255) return refuse(errors::kInvalidFreq);
            options.frequency = *frequency;
        } else {
            return refuse(errors::kSyntax);
        }
    }
    return options;
}

// The filter a DUMP payload holds, checked in Redis's order (its version and
// checksum, then its content), then against bloomery's bounds on new
// filters (as BF.LOADCHUNK's header); or the error to reply.
core::Result<store::ValueRef> filter_of_payload(const Context& ctx, std::string_view payload) {
    if (!persist::verify_dump_payload(payload)) return refuse(errors::kBadDumpPayload);
    if (persist::dump_value_type(payload) == persist::kDumpTypeCuckoo) {
        core::Result<cuckoo::CuckooRef> filter = cf::from_payload(ctx, payload);
        if (!filter) return filter.failure();
        return store::ValueRef(std::move(*filter));
    }
    const core::Result<persist::DumpValue> value = persist::parse_dump_value(payload);
    if (!value) return refuse(errors::kBadDataFormat);
    core::Result<bloom::FilterRef> filter = build_new_filter(ctx, value->layers, [&] {
        return persist::build_dump_filter(*value, ctx.config.maxmemory);
    });
    if (!filter) return filter.failure();
    return store::ValueRef(std::move(*filter));
}

// RESTORE's deadline (Unix time in ms, 0: none) for a TTL that passed its
// checks: from now, saturating, unless ABSTTL made it one already.
std::int64_t restore_deadline(std::int64_t ttl, TimeBase base, std::int64_t now) {
    if (ttl == 0 || base == TimeBase::unix_time) return ttl;
    return ttl > std::numeric_limits<std::int64_t>::max() - now
               ? std::numeric_limits<std::int64_t>::max()
               : ttl + now;
}

// RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds]
// [FREQ frequency], checked in Redis's order: options, BUSYKEY, the TTL, the
// payload (filter_of_payload).
void cmd_restore(Context& ctx, Args argv) {
    const core::Result<RestoreOptions> options = parse_restore_options(argv);
    if (!options) {
        ctx.out.error(options.error());
        return;
    }
    const std::string_view key = argv[1];
    const bool replace = options->if_exists == IfExists::replace;
    if (!replace && ctx.keyspace.contains(key)) {
        ctx.out.error(errors::kBusyKey);
        return;
    }
    const std::optional<std::int64_t> ttl = ArgCursor(argv, 2).next_int();
    if (!ttl) {
        ctx.out.error(errors::kNotInteger);
        return;
    }
    if (*ttl < 0) {
        ctx.out.error(errors::kInvalidTtl);
        return;
    }
    core::Result<store::ValueRef> filter = filter_of_payload(ctx, argv[3]);
    if (!filter) {
        ctx.out.error(filter.error());
        return;
    }
    const std::int64_t now = store::now_ms();
    const std::int64_t deadline = restore_deadline(*ttl, options->ttl_base, now);
    if (deadline != 0 && deadline <= now) {
        // Already expired: nothing is created, and REPLACE deletes what
        // was there (Redis: a DEL).
        if (replace && ctx.keyspace.erase(key)) note_changes(ctx);
        ctx.out.ok();
        return;
    }
    // IDLETIME sets the access clock back (OBJECT IDLETIME), FREQ the use
    // counter (OBJECT FREQ); without them, as a new key's.
    const store::RestoreOptions restore{
        .expire_at_ms = deadline,
        .if_live = replace ? store::IfLive::replace : store::IfLive::keep,
        .idle_seconds = std::max<std::int64_t>(options->idle_seconds, 0),
        .frequency = options->frequency >= 0 ? static_cast<std::uint32_t>(options->frequency)
                                             : store::key_access::kInitialCount};
    if (!ctx.keyspace.restore(key, std::move(*filter), restore)) {
        ctx.out.error(errors::kBusyKey);  // created by another client meanwhile
        return;
    }
    note_changes(ctx);
    ctx.out.ok();
}

// ---- MIGRATE ----

// MIGRATE's keys, as Redis's migrateGetKeys finds them: argument 3, or
// every argument after KEYS (none if argument 3 is not empty then: a
// syntax error the command reports). Options before KEYS are skipped with
// their values, so a password that reads "KEYS" is not taken for it.
KeyRange migrate_keys(Args argv) {
    ArgCursor args(argv, 6);
    while (args.has_next()) {
        if (args.eat("KEYS")) {
            if (!argv[3].empty()) return {};
            return {static_cast<long>(args.position()), static_cast<long>(argv.size()) - 1, 1};
        }
        // AUTH is followed by a password, AUTH2 by a username and a
        // password; any other option stands alone.
        if (args.eat("AUTH2")) {
            args.next();
        } else {
            args.eat("AUTH");
        }
        args.next();
    }
    return {3, 3, 1};
}

// Whether MIGRATE deletes the keys the target took (the default) or, with
// COPY, keeps them here too.
enum class Transfer { move, copy };

// MIGRATE's options after the timeout, as Redis 7 reads them.
struct MigrateOptions {
    Transfer transfer = Transfer::move;   // COPY
    IfExists if_exists = IfExists::keep;  // REPLACE: the target's keys are replaced
    MigrateRequest request;               // AUTH / AUTH2 filled in, the rest not yet
    Args keys;                            // argument 3, or those after KEYS
};

core::Result<MigrateOptions> parse_migrate_options(Args argv) {
    MigrateOptions options;
    options.keys = argv.subspan(3, 1);
    ArgCursor args(argv, 6);
    while (args.has_next()) {
        if (args.eat("COPY")) {
            options.transfer = Transfer::copy;
        } else if (args.eat("REPLACE")) {
            options.if_exists = IfExists::replace;
        } else if (args.eat("AUTH")) {
            if (!args.has_next()) return refuse(errors::kSyntax);
            options.request.auth = true;
            options.request.password.assign(args.next());
        } else if (args.eat("AUTH2")) {
            if (args.remaining() < 2) return refuse(errors::kSyntax);
            options.request.auth = true;
            options.request.username.assign(args.next());
            options.request.password.assign(args.next());
        } else if (args.eat("KEYS")) {
            if (!argv[3].empty()) return refuse(errors::kMigrateKeysWithKey);
            options.keys = args.rest();
        } else {
            return refuse(errors::kSyntax);
        }
    }
    return options;
}

// How many times MIGRATE sends again a key that took adds while it was
// sent, before it keeps it here and answers so. A filter is first sent with
// its writers free; one that changed meanwhile is re-sent (the target told
// to replace its copy), in cluster mode with its writes held
// (cluster/write_holds.hpp), which ends the race.
constexpr int kMigrateResends = 8;

// What one MIGRATE knows while its exchange runs (on the network layer's
// thread: restore_command and then the completion, one after the other).
struct Migration {
    store::Keyspace* keyspace = nullptr;
    Transfer transfer = Transfer::move;
    IfExists if_exists = IfExists::keep;
    std::string_view restore_name;  // RESTORE, or RESTORE-ASKING in a cluster
    std::uint64_t max_payload = 0;
    std::vector<std::string> keys;
    // What was sent for each key: the filter (held, so its address names
    // it until the end), its item count and layer count then.
    struct Sent {
        // The filter sent; for a Cuckoo filter `items` is the number of its
        // last change then (CuckooObject::changes()).
        store::ValueRef filter;
        std::uint64_t items = 0;
        std::size_t layers = 0;
        // A counting filter's contents when sent (ScalableFilter::
        // content_hash): a delete and an add change neither the items nor
        // the layers.
        std::uint64_t contents = 0;
    };
    std::vector<Sent> sent;
    bool too_large = false;      // a key's payload passed proto-max-bulk-len: not sent
    bool out_of_memory = false;  // a key's payload could not be allocated: not sent
    bool expiring = false;       // an expiring filter, which RESTORE does not take: not sent
    // Keys that took adds while they were sent (kept here), and how many
    // more times such keys are sent again before MIGRATE gives up on them.
    std::vector<std::string> changed;
    int resends_left = kMigrateResends;
    std::uint64_t deleted = 0;  // over every round
    // Cluster mode: where writes to hot keys are held, and the keys this
    // MIGRATE holds (released when it ends, whatever the outcome).
    cluster::WriteHolds* holds = nullptr;
    std::vector<std::string> held;

    Migration() = default;
    Migration(const Migration&) = delete;
    Migration& operator=(const Migration&) = delete;
    ~Migration() { release_holds(); }

    // Writers waiting on a held key are answered: -ASK to the target if the
    // key left, else -TRYAGAIN.
    void release_holds() {
        if (holds == nullptr || held.empty()) return;
        holds->release(held, [this](std::string_view key) { return !keyspace->contains(key); });
        held.clear();
    }

    // Makes the keys that changed the next round's keys: sent again with
    // REPLACE, the target's copy of them being one this MIGRATE sent. False
    // when there are none, or no round is left.
    bool next_round() {
        if (changed.empty() || resends_left == 0) return false;
        --resends_left;
        keys = std::move(changed);
        changed.clear();
        sent.assign(keys.size(), Sent{});
        if_exists = IfExists::replace;
        // Changed during its copy: the next copy holds its writes.
        if (holds != nullptr) {
            std::vector<std::string> newly;
            for (const std::string& key : keys) {
                if (std::find(held.begin(), held.end(), key) == held.end()) newly.push_back(key);
            }
            holds->hold(newly);
            held.insert(held.end(), newly.begin(), newly.end());
            if (!newly.empty()) {
                spdlog::info(
                    "MIGRATE: {} key(s) changed during their copy; the next copy holds "
                    "their writes",
                    newly.size());
            }
        }
        return true;
    }

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
        if (entry->value.age_or_null() != nullptr) {
            expiring = true;
            return false;
        }
        if (const cuckoo::CuckooObject* object = entry->value.cuckoo_or_null()) {
            const cuckoo::CuckooObject::Copy copy = object->copy();
            const std::string payload = persist::cuckoo_dump_payload(copy.filter);
            return append_restore(index, ttl, payload, Sent{entry->value, copy.changes}, command);
        }
        const bloom::ScalableFilter& filter = entry->value.filter();
        const std::unique_lock serial = filter.serialize_changes();
        Sent record{entry->value, 0, filter.num_layers()};
        if (filter.counting()) record.contents = filter.content_hash();
        // Counted before the payload copies the bits: an add after this is
        // seen as a change when the key is deleted.
        for (std::size_t i = 0; i < record.layers; ++i) record.items += filter.layer(i).items();
        const std::size_t before = command.size();
        append_restore_head(index, ttl, command);
        const std::size_t start = command.size();
        if (!persist::append_dump_payload(filter, record.layers, command, max_payload)) {
            command.resize(before);
            too_large = true;
            return false;
        }
        insert_length_line(command, start);
        command += "\r\n";
        if (if_exists == IfExists::replace) append_bulk(command, "REPLACE");
        sent[index] = std::move(record);
        return true;
    }

    // RESTORE key ttl, before the payload.
    void append_restore_head(std::size_t index, std::int64_t ttl, std::string& command) const {
        append_length_line(command, '*', if_exists == IfExists::replace ? 5 : 4);
        append_bulk(command, restore_name);
        append_bulk(command, keys[index]);
        append_bulk(command, std::to_string(ttl));
    }

    // The whole RESTORE of a payload made already (a Cuckoo filter's).
    bool append_restore(std::size_t index, std::int64_t ttl, std::string_view payload, Sent record,
                        std::string& command) {
        if (payload.size() > max_payload) {
            too_large = true;
            return false;
        }
        append_restore_head(index, ttl, command);
        append_bulk(command, payload);
        if (if_exists == IfExists::replace) append_bulk(command, "REPLACE");
        sent[index] = std::move(record);
        return true;
    }

    // Once the exchange is over: deletes the keys the target took, unless
    // COPY, each only if it is unchanged since it was sent (one that took
    // adds meanwhile is kept rather than lose them). How many were deleted,
    // and whether one was kept for a change.
    struct Deletion {
        std::uint64_t deleted = 0;
        bool kept_changed = false;
    };
    Deletion delete_accepted(const MigrateResult& result) {
        Deletion deletion;
        if (transfer == Transfer::copy) return deletion;
        for (const std::size_t index : result.accepted) {
            const Sent& was = sent[index];
            const store::Keyspace::EraseIf erased =
                was.filter.cuckoo_or_null() != nullptr
                    ? keyspace->erase_if_unchanged(keys[index], was.filter.cuckoo_or_null(),
                                                   was.items)
                    : keyspace->erase_if_unchanged(keys[index], was.filter.bloom_or_null(),
                                                   was.items, was.layers, was.contents);
            switch (erased) {
                case store::Keyspace::EraseIf::erased:
                    ++deletion.deleted;
                    break;
                case store::Keyspace::EraseIf::gone:
                    break;
                case store::Keyspace::EraseIf::changed:
                    deletion.kept_changed = true;
                    changed.push_back(keys[index]);
                    break;
            }
        }
        return deletion;
    }

    // MIGRATE's error reply, empty if none, in Redis's precedence: the
    // target's error, then an I/O error; then bloomery's own.
    std::string reply_error(const MigrateResult& result, const Deletion& deletion) const {
        if (!result.target_error.empty()) {
            return std::string(errors::kMigrateTargetError) + result.target_error;
        }
        switch (result.failure) {
            case MigrateResult::Failure::connect:
                return std::string(errors::kMigrateConnect);
            case MigrateResult::Failure::write:
                return std::string(errors::kMigrateWrite);
            case MigrateResult::Failure::read:
                return std::string(errors::kMigrateRead);
            case MigrateResult::Failure::none:
                break;
        }
        if (too_large) return std::string(errors::kDumpTooLarge);
        if (out_of_memory) return std::string(errors::kNoMemory);
        if (expiring) return std::string(errors::kExpiringUnsupported);
        if (deletion.kept_changed) return std::string(errors::kMigrateKeyChanged);
        return {};
    }
};

// One MIGRATE in flight: what runs each round of its exchange and answers
// the client after the last.
struct MigrationRun {
    std::shared_ptr<Migration> migration;
    command::Migration* service = nullptr;
    MigrateRequest request;  // the target and AUTH; keys filled in per round
    DeferredReply reply;
    WorkerStats* stats = nullptr;
};

// Sends the migration's keys; keys that took adds meanwhile are sent again
// (Migration::next_round) before the client is answered.
void run_migration(MigrationRun run) {
    MigrateRequest request = run.request;
    request.keys = run.migration->keys.size();
    request.restore_command = [migration = run.migration](std::size_t index, std::string& command) {
        return migration->restore_command(index, command);
    };
    command::Migration* service = run.service;
    service->migrate(std::move(request), [run = std::move(run)](const MigrateResult& result) {
        Migration& migration = *run.migration;
        const Migration::Deletion deletion = migration.delete_accepted(result);
        migration.deleted += deletion.deleted;
        const bool clean = result.failure == MigrateResult::Failure::none &&
                           result.target_error.empty() && !migration.too_large &&
                           !migration.out_of_memory && !migration.expiring;
        if (clean && migration.next_round()) return run_migration(run);
        migration.release_holds();
        // The client's connection runs this on its worker thread, the only
        // writer of `stats`.
        run.reply.complete([error = migration.reply_error(result, deletion),
                            deleted = migration.deleted, stats = run.stats](resp::Writer& out) {
            if (deleted != 0) WorkerStats::bump(stats->changes, deleted);
            if (error.empty()) {
                out.ok();
            } else {
                out.error(error);
            }
        });
    });
}

// MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE]
// [AUTH password] [AUTH2 username password] [KEYS key [key ...]]. The
// options and the keys are checked here; the exchange with the target runs
// on the network layer's thread (command/server.hpp: Migration) while this
// client waits (a deferred reply) and the worker serves the others. Each
// key's payload is made when it is about to be sent, so one MIGRATE holds
// one payload at a time. Keys the target took are then deleted here
// (Migration::delete_accepted) and the client answered.
void cmd_migrate(With<uses::Migration, uses::Cluster>& ctx, Args argv) {
    core::Result<MigrateOptions> options = parse_migrate_options(argv);
    if (!options) {
        ctx.out.error(options.error());
        return;
    }
    const std::optional<std::int64_t> db = ArgCursor(argv, 4).next_int();
    std::optional<std::int64_t> timeout_ms = ArgCursor(argv, 5).next_int();
    if (!timeout_ms || !db) {
        ctx.out.error(errors::kNotInteger);
        return;
    }
    if (*timeout_ms <= 0) timeout_ms = 1000;

    auto migration = std::make_shared<Migration>();
    migration->keyspace = &ctx.keyspace;
    migration->transfer = options->transfer;
    migration->if_exists = options->if_exists;
    migration->restore_name = ctx.config.cluster_enabled ? "RESTORE-ASKING" : "RESTORE";
    if (ctx.config.cluster_enabled) migration->holds = &ctx.server.cluster.write_holds();
    migration->max_payload = ctx.config.proto_max_bulk_len;
    // Keys missing now are not sent; if all are, there is nothing to do
    // (Redis answers NOKEY: often a key that just expired, not an error).
    for (const std::string_view key : options->keys) {
        if (ctx.keyspace.contains(key)) migration->keys.emplace_back(key);
    }
    if (migration->keys.empty()) {
        ctx.out.simple("NOKEY");
        return;
    }
    migration->sent.resize(migration->keys.size());

    // A port that is no port is a target that cannot be reached, as Redis
    // (atoi) finds it.
    const std::optional<std::int64_t> port = ArgCursor(argv, 2).next_int();
    if (!port || *port < 1 || *port > 65535) {
        ctx.out.error(errors::kMigrateConnect);
        return;
    }
    const DeferredReply reply = ctx.defer_reply();
    if (!reply) {
        ctx.out.error(errors::kCannotWait);
        return;
    }
    MigrateRequest& request = options->request;
    request.host.assign(argv[1]);
    request.port = static_cast<std::uint16_t>(*port);
    request.timeout_ms = *timeout_ms;
    request.db = *db;
    run_migration(MigrationRun{std::move(migration), &ctx.server.migration, std::move(request),
                               reply, &ctx.stats});
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
