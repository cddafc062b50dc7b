// CF.* commands that create Cuckoo filters, add, look up and delete, with
// RedisBloom 2.4's semantics and texts (the family: cf_family.hpp).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bloomery/command/errors.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/core/ascii.hpp"
#include "bloomery/core/memory.hpp"
#include "cf_family.hpp"
#include "common.hpp"
#include "families.hpp"

namespace bloomery::command {

namespace cf {

std::uint64_t growth_limit(const Context& ctx, std::uint64_t current) {
    std::uint64_t limit = cuckoo::kNoLimit;
    if (ctx.config.max_filter_bytes != 0) limit = ctx.config.max_filter_bytes;
    if (ctx.config.maxmemory != 0) {
        const std::uint64_t used = core::memory_used_total();
        const std::uint64_t room = used < ctx.config.maxmemory ? ctx.config.maxmemory - used : 0;
        limit = std::min(limit, current + room);
    }
    return limit;
}

}  // namespace cf

namespace {

using cuckoo::CuckooFilter;
using cuckoo::CuckooObject;
using cuckoo::InsertStatus;

// One of CF.RESERVE's options: the value after the first `word` among the
// arguments after the capacity (RedisBloom's search), in [low, high].
core::Result<std::optional<std::int64_t>> find_option(Args argv, std::string_view word,
                                                      std::int64_t low, std::int64_t high) {
    for (std::size_t i = 3; i < argv.size(); ++i) {
        if (!core::iequals(argv[i], word)) continue;
        const std::optional<std::int64_t> value =
            i + 1 < argv.size() ? cf::integer(argv[i + 1]) : std::nullopt;
        if (!value) return core::Error{"Couldn't parse " + std::string(word)};
        if (*value < low || *value > high) {
            return core::Error{std::string(word) + ": value must be an integer between " +
                               std::to_string(low) + " and " + std::to_string(high) +
                               ", inclusive."};
        }
        return std::optional<std::int64_t>(value);
    }
    return std::optional<std::int64_t>();
}

// CF.RESERVE's parameters, checked in RedisBloom's order.
core::Result<cuckoo::CuckooParams> parse_reserve(Args argv) {
    if (argv.size() % 2 == 0) return wrong_arity("cf.reserve");
    const std::optional<std::int64_t> capacity = cf::integer(argv[2]);
    if (!capacity) return refuse(errors::kCuckooBadCapacity);
    cuckoo::CuckooParams params;
    const auto take = [&](std::string_view word, std::int64_t low, std::int64_t high,
                          std::uint16_t& out) -> core::Status {
        core::Result<std::optional<std::int64_t>> found = find_option(argv, word, low, high);
        if (!found) return found.failure();
        if (*found) out = static_cast<std::uint16_t>(**found);
        return {};
    };
    if (core::Status s = take("MAXITERATIONS", 1, cuckoo::kMaxIterations, params.max_iterations);
        !s) {
        return s.failure();
    }
    if (core::Status s = take("BUCKETSIZE", 1, cuckoo::kMaxBucketSize, params.bucket_size); !s) {
        return s.failure();
    }
    if (core::Status s = take("EXPANSION", 0, cuckoo::kMaxExpansion, params.expansion); !s) {
        return s.failure();
    }
    if (*capacity < 2 * std::int64_t{params.bucket_size}) {
        return refuse(errors::kCuckooSmallCapacity);
    }
    params.capacity = static_cast<std::uint64_t>(*capacity);
    return params;
}

// A new Cuckoo filter with `params`, within --max-filter-bytes and
// --maxmemory (RedisBloom's texts when it cannot be made).
core::Result<cuckoo::CuckooRef> make_cuckoo(const Context& ctx,
                                            const cuckoo::CuckooParams& params) {
    core::Result<CuckooFilter> filter = CuckooFilter::create(params, cf::growth_limit(ctx, 0));
    if (!filter) return filter.failure();
    return CuckooObject::make(std::move(*filter));
}

void cmd_reserve(Context& ctx, Args argv) {
    const core::Result<cuckoo::CuckooParams> params = parse_reserve(argv);
    if (!params) {
        ctx.out.error(params.error());
        return;
    }
    if (ctx.keyspace.contains(argv[1])) {
        ctx.out.error(exists_error(ctx, argv[1], store::ValueKind::cuckoo));
        return;
    }
    core::Result<cuckoo::CuckooRef> filter = make_cuckoo(ctx, *params);
    if (!filter) {
        ctx.out.error(filter.error());
        return;
    }
    if (!ctx.keyspace.insert_new(argv[1], std::move(*filter))) {
        ctx.out.error(exists_error(ctx, argv[1], store::ValueKind::cuckoo));
        return;
    }
    note_changes(ctx);
    ctx.out.ok();
}

// How one add ended.
enum class Added { inserted, exists, full, grow_failed, max_expansions, not_found, refused };

struct AddRequest {
    bool unique = false;                           // ADDNX, INSERTNX
    bool check_expansions = true;                  // the sub-filter limit, before the add
    const cuckoo::CuckooParams* create = nullptr;  // null: NOCREATE
};

// Adds one item to the filter at `key` (created with request.create when
// missing). `refusal` holds why a new filter could not be made.
Added add_one(Context& ctx, std::string_view key, std::string_view item, const AddRequest& request,
              std::optional<core::Error>& refusal) {
    const std::uint64_t hash = cuckoo::cuckoo_hash(item);
    Added added = Added::not_found;
    cuckoo::InsertRecord record;
    const std::function<store::ValueRef()> make = [&]() -> store::ValueRef {
        core::Result<cuckoo::CuckooRef> made = make_cuckoo(ctx, *request.create);
        if (made) return std::move(*made);
        refusal = made.failure();
        return {};
    };
    const bool found = ctx.keyspace.change_cuckoo(
        key, request.create != nullptr ? &make : nullptr, 0,
        [&](CuckooFilter& filter) -> std::optional<store::CuckooChange> {
            if (request.check_expansions && filter.num_filters() >= cf::kMaxSubFilters) {
                added = Added::max_expansions;
                return std::nullopt;
            }
            const std::uint64_t limit = cf::growth_limit(ctx, filter.bytes());
            record =
                request.unique ? filter.insert_unique(hash, limit) : filter.insert(hash, limit);
            switch (record.status) {
                case InsertStatus::inserted:
                    added = Added::inserted;
                    return store::CuckooChange::inserted(record);
                case InsertStatus::exists:
                    added = Added::exists;
                    break;
                case InsertStatus::no_space:
                    added = Added::full;
                    break;
                case InsertStatus::grow_failed:
                    added = Added::grow_failed;
                    break;
            }
            return std::nullopt;
        });
    if (!found) return refusal ? Added::refused : Added::not_found;
    if (added == Added::inserted) note_changes(ctx);
    return added;
}

std::string_view add_error(Added added) {
    switch (added) {
        case Added::full:
            return errors::kCuckooFull;
        case Added::grow_failed:
            return errors::kCuckooGrowFailed;
        case Added::max_expansions:
            return errors::kCuckooMaxExpansions;
        default:
            return errors::kNotFound;
    }
}

void add_command(Context& ctx, Args argv, bool unique) {
    const cuckoo::CuckooParams defaults;
    std::optional<core::Error> refusal;
    const Added added = add_one(ctx, argv[1], argv[2], {unique, true, &defaults}, refusal);
    if (added == Added::inserted || added == Added::exists) {
        reply_flag(ctx, added == Added::inserted);
    } else if (added == Added::refused) {
        ctx.out.error(refusal->text);
    } else {
        ctx.out.error(add_error(added));
    }
}

void cmd_add(Context& ctx, Args argv) {
    add_command(ctx, argv, false);
}

void cmd_addnx(Context& ctx, Args argv) {
    add_command(ctx, argv, true);
}

// CF.INSERT's options before ITEMS, read by their first letter as
// RedisBloom reads them.
struct InsertOptions {
    cuckoo::CuckooParams params;
    bool nocreate = false;
    std::size_t first_item = 0;
};

core::Result<InsertOptions> parse_insert(Args argv, std::string_view name) {
    InsertOptions options;
    for (std::size_t i = 2; i < argv.size(); ++i) {
        const char letter = core::ascii_lower(argv[i].empty() ? '\0' : argv[i][0]);
        if (letter == 'i') {
            options.first_item = i + 1;
            break;
        }
        if (letter == 'n') {
            options.nocreate = true;
        } else if (letter == 'c') {
            if (++i == argv.size()) return wrong_arity(name);
            const std::optional<std::int64_t> capacity = cf::integer(argv[i]);
            if (!capacity) return refuse(errors::kCuckooBadCapacity);
            if (*capacity < 2 * std::int64_t{options.params.bucket_size}) {
                return refuse(errors::kCuckooSmallCapacity);
            }
            options.params.capacity = static_cast<std::uint64_t>(*capacity);
        } else {
            return refuse(errors::kCuckooUnknownArgument);
        }
    }
    if (options.first_item == 0 || options.first_item >= argv.size()) return wrong_arity(name);
    return options;
}

void insert_command(Context& ctx, Args argv, bool unique, std::string_view name) {
    const core::Result<InsertOptions> options = parse_insert(argv, name);
    if (!options) {
        ctx.out.error(options.error());
        return;
    }
    AddRequest request{unique, true, options->nocreate ? nullptr : &options->params};
    std::optional<core::Error> refusal;
    const std::size_t first = options->first_item;
    // The first item decides what the whole command answers with an error.
    const Added head = add_one(ctx, argv[1], argv[first], request, refusal);
    if (head == Added::not_found || head == Added::refused || head == Added::max_expansions) {
        ctx.out.error(head == Added::refused ? std::string_view(refusal->text) : add_error(head));
        return;
    }
    ctx.out.array(argv.size() - first);
    request.check_expansions = false;
    request.create = nullptr;
    for (std::size_t i = first; i < argv.size(); ++i) {
        const Added added = i == first ? head : add_one(ctx, argv[1], argv[i], request, refusal);
        if (!unique && ctx.out.protocol() >= 3) {
            // RedisBloom 2.8's RESP3 CF.INSERT: whether each was added.
            ctx.out.boolean(added == Added::inserted);
        } else {
            ctx.out.integer(added == Added::inserted ? 1 : added == Added::exists ? 0 : -1);
        }
    }
}

void cmd_insert(Context& ctx, Args argv) {
    insert_command(ctx, argv, false, "cf.insert");
}

void cmd_insertnx(Context& ctx, Args argv) {
    insert_command(ctx, argv, true, "cf.insertnx");
}

// CF.EXISTS, CF.COUNT: 0 for a missing key, or one holding a Bloom filter.
void cmd_exists(Context& ctx, Args argv) {
    const std::uint64_t hash = cuckoo::cuckoo_hash(argv[2]);
    bool present = false;
    cf::find(ctx, argv[1],
             [&](const CuckooObject& object) { present = object.lock().filter().exists(hash); });
    reply_flag(ctx, present);
}

// One lookup of the key and one hold of its lock for every item.
void cmd_mexists(Context& ctx, Args argv) {
    const Args items = argv.subspan(2);
    thread_local std::vector<std::uint8_t> present;
    present.assign(items.size(), 0);
    cf::find(ctx, argv[1], [&](const CuckooObject& object) {
        const CuckooObject::Locked locked = object.lock();
        for (std::size_t i = 0; i < items.size(); ++i) {
            present[i] = locked.filter().exists(cuckoo::cuckoo_hash(items[i])) ? 1 : 0;
        }
    });
    ctx.out.array(items.size());
    ctx.out.booleans(present);
}

void cmd_count(Context& ctx, Args argv) {
    const std::uint64_t hash = cuckoo::cuckoo_hash(argv[2]);
    std::uint64_t count = 0;
    cf::find(ctx, argv[1],
             [&](const CuckooObject& object) { count = object.lock().filter().count(hash); });
    ctx.out.integer(static_cast<std::int64_t>(count));
}

// A change to an existing Cuckoo filter, recorded; false if the key is
// missing or holds a Bloom filter (what RedisBloom's CF.DEL and CF.COMPACT
// answer alike).
bool change_existing(Context& ctx, std::string_view key, const store::Keyspace::CuckooEdit& edit) {
    try {
        return ctx.keyspace.change_cuckoo(key, nullptr, 0, edit);
    } catch (const store::WrongType&) {
        return false;
    }
}

void cmd_del(Context& ctx, Args argv) {
    const std::uint64_t hash = cuckoo::cuckoo_hash(argv[2]);
    cuckoo::DeleteRecord record;
    const bool found = change_existing(
        ctx, argv[1], [&](CuckooFilter& filter) -> std::optional<store::CuckooChange> {
            record = filter.remove(hash);
            if (!record.deleted) return std::nullopt;
            return store::CuckooChange::removed(record);
        });
    if (!found) {
        ctx.out.error(errors::kCuckooDelNotFound);
        return;
    }
    if (record.deleted) note_changes(ctx);
    reply_flag(ctx, record.deleted);
}

void cmd_compact(Context& ctx, Args argv) {
    const bool found = change_existing(
        ctx, argv[1], [](CuckooFilter& filter) -> std::optional<store::CuckooChange> {
            filter.compact(true);
            return store::CuckooChange::compacted();
        });
    if (!found) {
        ctx.out.error(errors::kCuckooNotFound);
        return;
    }
    note_changes(ctx);
    ctx.out.ok();
}

}  // namespace

void register_cf_commands(Registry& registry) {
    registry.register_handler<cmd_reserve>("cf.reserve");
    registry.register_handler<cmd_add>("cf.add");
    registry.register_handler<cmd_addnx>("cf.addnx");
    registry.register_handler<cmd_insert>("cf.insert");
    registry.register_handler<cmd_insertnx>("cf.insertnx");
    registry.register_handler<cmd_exists>("cf.exists");
    registry.register_handler<cmd_mexists>("cf.mexists");
    registry.register_handler<cmd_count>("cf.count");
    registry.register_handler<cmd_del>("cf.del");
    registry.register_handler<cmd_compact>("cf.compact");
    register_cf_chunk_commands(registry);
}

}  // namespace bloomery::command
