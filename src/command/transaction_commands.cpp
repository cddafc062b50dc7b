// MULTI, EXEC, DISCARD, WATCH, UNWATCH with Redis 7's semantics.
//
// Queueing happens in dispatch (registry.cpp): inside MULTI a command that
// passes its checks (name, arity, ACL, cluster slot, replica state, memory)
// answers +QUEUED; one refused makes EXEC answer EXECABORT and run nothing.
// EXEC holds the shards of every key its commands name (every shard for a
// command such as FLUSHALL or KEYS) for as long as they run, so no other
// client sees the transaction half applied, and the journal and replicas
// receive it as one unit (store::Keyspace::Transaction). Only transactions
// pay for that: a BF.ADD outside them reads one more word of a line it
// reads anyway.
//
// WATCH remembers what each key holds (store::Keyspace::WatchStamp); EXEC
// compares under the held shards, so nothing can change a watched key
// between the check and the commands. A key changed, deleted, created or
// expired since WATCH makes EXEC answer a null array.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "args.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/registry.hpp"
#include "families.hpp"

namespace bloomery::command {

namespace {

// What a string holds outside itself (none while it fits in place).
std::size_t heap_bytes(const std::string& s) {
    return s.capacity() > std::string().capacity() ? s.capacity() : 0;
}

}  // namespace

std::size_t TransactionState::bytes() const {
    std::size_t total = heap_bytes(argument_bytes) + arguments.capacity() * sizeof(arguments[0]) +
                        commands.capacity() * sizeof(Queued) + watched.capacity() * sizeof(Watched);
    for (const Watched& w : watched) total += heap_bytes(w.key);
    return total;
}

void TransactionState::publish() {
    charge.set(bytes());
    listed_commands.store(active ? static_cast<std::int64_t>(commands.size()) : -1,
                          std::memory_order_relaxed);
    listed_bytes.store(charge.bytes(), std::memory_order_relaxed);
}

void TransactionState::discard() {
    active = false;
    aborted = false;
    any_write = any_denyoom = any_keys = false;
    // Given back, not only cleared: a large queue leaves nothing behind.
    std::vector<Queued>().swap(commands);
    std::string().swap(argument_bytes);
    std::vector<std::pair<std::size_t, std::size_t>>().swap(arguments);
    std::vector<Watched>().swap(watched);
    publish();
}

namespace {

// The replies of one EXEC whose commands deferred theirs (REPLICAOF, which
// answers once the server's role has changed): the replies written at once
// are kept as bytes, and the whole array goes to the client once every
// deferred one has come.
class ExecReplies final : public std::enable_shared_from_this<ExecReplies> {
public:
    explicit ExecReplies(std::size_t commands) : deferred_(commands) {}

    // The sink command `index`'s deferred reply is delivered to.
    std::shared_ptr<ReplySink> sink(std::size_t index);

    // Once every command ran: `rendered` holds the array as written (the
    // deferred commands' replies missing), `ends[i]` where command i's
    // written reply ends in it. The array is delivered to `outer` when the
    // last deferred reply arrives (or now, if all have).
    void finish(std::string rendered, std::vector<std::size_t> ends, DeferredReply outer) {
        std::unique_lock lock(mutex_);
        rendered_ = std::move(rendered);
        ends_ = std::move(ends);
        outer_ = std::move(outer);
        finished_ = true;
        if (pending_ == 0) deliver(lock);
    }

private:
    class Slot;
    void arrived(std::size_t index, ReplyWriter write_reply) {
        std::unique_lock lock(mutex_);
        deferred_[index] = std::move(write_reply);
        if (--pending_ == 0 && finished_) deliver(lock);
    }
    void deliver(std::unique_lock<std::mutex>& lock) {
        auto rendered = std::make_shared<std::string>(std::move(rendered_));
        auto ends = std::make_shared<std::vector<std::size_t>>(std::move(ends_));
        auto deferred = std::make_shared<std::vector<ReplyWriter>>(std::move(deferred_));
        DeferredReply outer = std::move(outer_);
        lock.unlock();
        outer.complete([rendered, ends, deferred](resp::Writer& out) {
            // The header and each reply in order, a deferred one in its place.
            std::size_t from = 0;
            for (std::size_t i = 0; i < ends->size(); ++i) {
                out.buffer().append(*rendered, from, (*ends)[i] - from);
                from = (*ends)[i];
                if ((*deferred)[i]) (*deferred)[i](out);
            }
        });
    }

    std::mutex mutex_;
    std::vector<ReplyWriter> deferred_;
    std::size_t pending_ = 0;
    bool finished_ = false;
    std::string rendered_;
    std::vector<std::size_t> ends_;
    DeferredReply outer_;
};

class ExecReplies::Slot final : public ReplySink {
public:
    Slot(std::shared_ptr<ExecReplies> replies, std::size_t index)
        : replies_(std::move(replies)), index_(index) {}
    void deliver(ReplyWriter write_reply) override {
        replies_->arrived(index_, std::move(write_reply));
    }

private:
    std::shared_ptr<ExecReplies> replies_;
    std::size_t index_;
};

std::shared_ptr<ReplySink> ExecReplies::sink(std::size_t index) {
    std::lock_guard lock(mutex_);
    ++pending_;
    return std::make_shared<Slot>(shared_from_this(), index);
}

// What EXEC gives its commands as their suspender: a command that defers its
// reply gets a slot of the EXEC's array instead of suspending the client
// itself (the EXEC suspends it, once, if any did).
class ExecSuspender final : public ClientSuspender {
public:
    explicit ExecSuspender(std::shared_ptr<ExecReplies> replies) : replies_(std::move(replies)) {}
    std::shared_ptr<ReplySink> suspend() override {
        any_ = true;
        return replies_->sink(current_);
    }
    void set_current(std::size_t index) { current_ = index; }
    bool any() const { return any_; }

private:
    std::shared_ptr<ExecReplies> replies_;
    std::size_t current_ = 0;
    bool any_ = false;
};

void cmd_multi(Context& ctx, Args) {
    TransactionState& transaction = ctx.client.transaction;
    if (transaction.active) {
        ctx.out.error(errors::kMultiNested);
        return;
    }
    transaction.active = true;
    transaction.publish();
    ctx.out.ok();
}

void cmd_discard(Context& ctx, Args) {
    TransactionState& transaction = ctx.client.transaction;
    if (!transaction.active) {
        ctx.out.error(errors::kDiscardWithoutMulti);
        return;
    }
    transaction.discard();
    ctx.out.ok();
}

void cmd_watch(Context& ctx, Args argv) {
    TransactionState& transaction = ctx.client.transaction;
    if (transaction.active) return ctx.out.error(errors::kWatchInsideMulti);
    const Args keys = ArgCursor(argv).rest();
    const std::size_t limit =
        std::min<std::size_t>(ctx.config.client_query_buffer_limit, kMaxTransactionQueueBytes);
    std::size_t adding = 0;
    for (const std::string_view key : keys)
        adding += key.size() + sizeof(TransactionState::Watched);
    if (transaction.bytes() + adding > limit) return ctx.out.error(errors::kWatchTooLarge);
    for (const std::string_view key : keys) {
        const bool known =
            std::any_of(transaction.watched.begin(), transaction.watched.end(),
                        [&](const TransactionState::Watched& w) { return w.key == key; });
        if (known) continue;
        transaction.watched.push_back({std::string(key), ctx.keyspace.watch_stamp(key)});
    }
    transaction.publish();
    ctx.out.ok();
}

void cmd_unwatch(Context& ctx, Args) {
    TransactionState& transaction = ctx.client.transaction;
    std::vector<TransactionState::Watched>().swap(transaction.watched);
    transaction.publish();
    ctx.out.ok();
}

// The queued commands' arguments, as views into the bytes the queue holds.
std::vector<std::string_view> queued_arguments(const TransactionState& transaction) {
    std::vector<std::string_view> arguments;
    arguments.reserve(transaction.arguments.size());
    for (const auto& [offset, size] : transaction.arguments) {
        arguments.emplace_back(transaction.argument_bytes.data() + offset, size);
    }
    return arguments;
}

// The keys EXEC must hold: those its commands name and the watched ones;
// with Shards::every when a command touches keys it does not name.
struct KeysToHold {
    enum class Shards { named, every };
    std::vector<std::string_view> keys;
    Shards shards = Shards::named;
};

KeysToHold keys_to_hold(const TransactionState& transaction,
                        const std::vector<std::string_view>& arguments) {
    KeysToHold hold;
    for (const TransactionState::Queued& queued : transaction.commands) {
        const CommandSpec& spec = *queued.spec;
        if (spec.keyspace_wide) hold.shards = KeysToHold::Shards::every;
        const Args argv(arguments.data() + queued.first_argument, queued.argument_count);
        for (std::size_t position : Registry::key_positions(spec, argv)) {
            hold.keys.push_back(argv[position]);
        }
    }
    for (const TransactionState::Watched& watched : transaction.watched) {
        hold.keys.push_back(watched.key);
    }
    return hold;
}

// What running the queue left in the output: where each reply ends, or
// nothing at all when the replies passed the limit.
struct QueueReplies {
    enum class Kept { all, none };
    std::vector<std::size_t> ends;
    Kept kept = Kept::all;
};

// Runs the queue, each command's reply in the array already opened in
// ctx.out (from `start`). Replies past client-output-buffer-limit are
// dropped and the client closed (as Redis does once its output passes the
// hard limit), but every command still runs: the transaction is all or
// nothing. The hard limit is the normal class's: the array is rendered
// whole before any of it is written.
QueueReplies run_queue(DispatchContext& ctx, const std::vector<std::string_view>& arguments,
                       ExecSuspender& suspender, std::size_t start) {
    const TransactionState& transaction = ctx.client.transaction;
    std::string& out = ctx.out.buffer();
    QueueReplies replies;
    replies.ends.reserve(transaction.commands.size());
    std::string dropped;
    resp::Writer dropping(dropped);
    bool over_limit = false;
    const std::uint64_t hard_limit =
        ctx.settings.client_output_buffer_limits().get(core::ClientClass::normal).hard_bytes;
    for (std::size_t i = 0; i < transaction.commands.size(); ++i) {
        const TransactionState::Queued& queued = transaction.commands[i];
        suspender.set_current(i);
        if (over_limit) dropping.set_protocol(ctx.out.protocol());
        DispatchContext inner{ctx.registry,
                              ctx.keyspace,
                              ctx.config,
                              ctx.settings,
                              ctx.server,
                              ctx.client,
                              ctx.stats,
                              over_limit ? dropping : ctx.out,
                              ctx.suspender != nullptr ? &suspender : nullptr,
                              ctx.slowlog};
        inner.deny_blocking = true;
        run_queued(ctx.registry, inner, *queued.spec,
                   Args(arguments.data() + queued.first_argument, queued.argument_count));
        dropped.clear();
        replies.ends.push_back(out.size());
        if (!over_limit && hard_limit != 0 && out.size() - start > hard_limit) {
            spdlog::warn(
                "closing client id={} addr={}: EXEC's reply passed client-output-buffer-limit",
                ctx.client.id, ctx.client.address);
            over_limit = true;
            out.resize(start);
            ctx.client.close_after_reply = true;
            replies.kept = QueueReplies::Kept::none;
        }
    }
    return replies;
}

void cmd_exec(DispatchContext& ctx, Args) {
    TransactionState& transaction = ctx.client.transaction;
    if (!transaction.active) return ctx.out.error(errors::kExecWithoutMulti);
    if (transaction.aborted) {
        transaction.discard();
        return ctx.out.error(errors::kExecAbort);
    }
    const std::vector<std::string_view> arguments = queued_arguments(transaction);
    const KeysToHold hold = keys_to_hold(transaction, arguments);
    const store::TransactionScope scope = hold.shards == KeysToHold::Shards::every
                                              ? store::TransactionScope::every_shard
                                              : store::TransactionScope::keys;
    store::Keyspace::Transaction held;
    try {
        if (scope == store::TransactionScope::every_shard || !hold.keys.empty()) {
            held = ctx.keyspace.begin_transaction(hold.keys, scope);
        }
    } catch (const std::bad_alloc&) {
        // Nothing ran: the transaction ends as if refused.
        transaction.discard();
        return ctx.out.error(std::string(errors::kExecAbortBecause) +
                             std::string(errors::kNoMemory));
    }
    for (const TransactionState::Watched& watched : transaction.watched) {
        if (ctx.keyspace.watch_stamp(watched.key) != watched.stamp) {
            held.end();
            transaction.discard();
            return ctx.out.null_array();
        }
    }
    auto replies = std::make_shared<ExecReplies>(transaction.commands.size());
    ExecSuspender suspender(replies);
    std::string& out = ctx.out.buffer();
    const std::size_t start = out.size();
    ctx.out.array(transaction.commands.size());
    QueueReplies written = run_queue(ctx, arguments, suspender, start);
    held.end();
    transaction.discard();
    if (written.kept == QueueReplies::Kept::none || !suspender.any()) return;
    // Some command deferred its reply: the array waits for it.
    std::string rendered = out.substr(start);
    for (std::size_t& end : written.ends) end -= start;
    out.resize(start);
    replies->finish(std::move(rendered), std::move(written.ends), ctx.defer_reply());
}

}  // namespace

void register_transaction_commands(Registry& registry) {
    registry.register_handler<cmd_multi>("multi");
    registry.register_handler<cmd_exec>("exec");
    registry.register_handler<cmd_discard>("discard");
    registry.register_handler<cmd_watch>("watch");
    registry.register_handler<cmd_unwatch>("unwatch");
}

}  // namespace bloomery::command
