#include "connection.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "bloomery/command/acl.hpp"
#include "bloomery/net/replication.hpp"
#include "bloomery/persist/journal.hpp"
#include "bloomery/persist/snapshot.hpp"
#include "client_book.hpp"

namespace bloomery::net {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// Read size: 16 KiB like Redis's PROTO_IOBUF_LEN; the buffer grows beyond it
// only for commands larger than that.
constexpr std::size_t kReadChunk = std::size_t{16} * 1024;
// Most bytes one read asks for, however large the buffer has grown: a worker
// moves on to its other connections after at most this much from one client.
constexpr std::size_t kMaxReadSize = std::size_t{1024} * 1024;
// An empty buffer larger than this is given back after its command ran.
constexpr std::size_t kShrinkAbove = 4 * kReadChunk;
// Replies buffered before the connection stops running commands and writes:
// keeps one pipelined burst from building an unbounded output buffer.
constexpr std::size_t kWriteHighWater = std::size_t{256} * 1024;
// argv capacity kept between reads (4 KiB): commands of more arguments
// allocate theirs and give it back, so 10,000 idle connections hold at most
// 40 MB of it. A million empty arguments once left megabytes behind in each
// connection (tests/bench/README.md).
constexpr std::size_t kKeptArguments = 256;

std::string endpoint_text(const asio::ip::tcp::endpoint& endpoint) {
    const auto address = endpoint.address();
    std::string text = address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
    return text + ":" + std::to_string(endpoint.port());
}

// The sink of one deferred reply: holds the connection (nothing else may while
// it waits with no I/O in flight) and hands the reply to its thread.
class PendingReply final : public command::ReplySink {
public:
    explicit PendingReply(std::shared_ptr<Connection> connection)
        : connection_(std::move(connection)) {}

    void deliver(command::ReplyWriter write_reply) override {
        // Called once (DeferredReply guarantees it), from any thread. If the
        // worker has stopped, the posted handler is destroyed unrun with its
        // io_context, and the connection with it.
        std::shared_ptr<Connection> connection = std::move(connection_);
        const asio::any_io_executor executor = connection->executor();
        asio::post(executor, [connection = std::move(connection),
                              write_reply = std::move(write_reply)]() mutable {
            connection->on_deferred_reply(std::move(write_reply));
        });
    }

private:
    std::shared_ptr<Connection> connection_;
};

// Until a client that must authenticate has done so, Redis's tighter bounds
// apply (10 arguments, 16 KB bulks, 1 MB buffered): an anonymous peer cannot
// make the server hold much. process() lifts them after a successful AUTH.
// Each argument costs a view (16 bytes) while its command runs, counted
// against the query buffer limit: one request's views may not exceed it, so
// its argument count is capped at the limit / 16 (65,536 for the smallest
// limit, 1 MiB; 1,024 for a 16 KiB limit before AUTH) as well as by the
// multibulk-length settings.
enum class ClientAuth { authenticated, unauthenticated };
resp::ParserLimits parser_limits(const core::Config& config, ClientAuth auth) {
    resp::ParserLimits limits{
        config.proto_max_bulk_len, config.proto_max_inline_len,
        std::min(config.proto_max_multibulk_len,
                 config.client_query_buffer_limit / resp::kArgumentViewBytes)};
    limits.unauthenticated = auth == ClientAuth::unauthenticated;
    limits.unauthenticated_max_multibulk_length =
        std::min(config.unauthenticated_max_multibulk_len,
                 config.unauthenticated_query_buffer_limit / resp::kArgumentViewBytes);
    limits.unauthenticated_max_bulk_length = config.unauthenticated_max_bulk_len;
    return limits;
}

}  // namespace

Connection::Connection(const ConnectionEnvironment& environment, Worker& worker,
                       asio::ip::tcp::socket& socket, std::int64_t id, ClientSlot slot)
    : env_(environment),
      worker_(worker),
      executor_(socket.get_executor()),
      parser_(parser_limits(environment.config, environment.registry.acl().auth_required()
                                                    ? ClientAuth::unauthenticated
                                                    : ClientAuth::authenticated)),
      writer_(out_),
      slot_(std::move(slot)) {
    reallocate_input(kReadChunk);
    writer_.set_error_stats(&worker.stats.error_stats);
    client_.id = id;
    error_code ignored;
    const auto remote = socket.remote_endpoint(ignored);
    if (!ignored) client_.address = endpoint_text(remote);
    const auto local = socket.local_endpoint(ignored);
    if (!ignored) client_.local_address = endpoint_text(local);
    client_.created_ms = store::now_ms();
    client_.last_interaction_ms.store(client_.created_ms, std::memory_order_relaxed);
    socket.set_option(asio::ip::tcp::no_delay(true), ignored);
}

void Connection::track() {
    position_ = env_.pool.track(worker_, shared_from_this());
    tracked_ = true;
    client_.subscriptions.self = std::weak_ptr<command::Subscriber>(shared_from_this());
}

void Connection::deliver(std::shared_ptr<const std::string> message) {
    asio::post(executor_, [self = shared_from_this(), message = std::move(message)] {
        if (self->closed_ || self->feed_) return;
        // Behind a write in flight (whose buffer is out_) in pushes_; with
        // none, straight into out_ and written.
        (self->writing_ ? self->pushes_ : self->out_).append(*message);
        self->report_buffers();
        self->enforce_output_limit();
        if (self->closing_ && self->writing_) {
            // Over its limit behind a write that does not complete (a
            // subscriber that does not read): closed now, which cancels it.
            self->close();
        } else if (!self->writing_) {
            self->advance();
        }
    });
}

void Connection::request_close() {
    asio::post(executor_, [self = shared_from_this()] {
        // Replies being written still go out; the socket closes after them.
        if (self->writing_) {
            self->closing_ = true;
        } else {
            self->close();
        }
    });
}

std::string Connection::describe() const {
    return command::format_client_line(client_, store::now_ms());
}

void Connection::reallocate_input(std::size_t capacity) {
    const std::size_t held = in_end_ - in_start_;
    auto fresh = std::make_unique_for_overwrite<char[]>(capacity);
    if (held > 0) std::memcpy(fresh.get(), in_.get() + in_start_, held);
    in_ = std::move(fresh);
    in_capacity_ = capacity;
    in_start_ = 0;
    in_end_ = held;
    query_charge_.set(capacity);
    client_.query_buffer_capacity.store(capacity, std::memory_order_relaxed);
    publish_memory();
}

void Connection::report_buffers() {
    client_.query_buffer_used.store(in_end_ - in_start_, std::memory_order_relaxed);
    client_.output_buffer_used.store(out_.size() + pushes_.size(), std::memory_order_relaxed);
    client_.output_buffer_capacity.store(out_.capacity() + pushes_.capacity(),
                                         std::memory_order_relaxed);
    output_charge_.set(out_.capacity() + pushes_.capacity());
    publish_memory();
}

void Connection::report_arguments() {
    arguments_charge_.set(argv_.capacity() * sizeof(std::string_view) + parser_.memory_bytes());
    publish_memory();
}

void Connection::shrink_arguments() {
    // The views point into the query buffer or the parser's storage, which
    // may be freed or moved from here on: they are dropped either way.
    argv_.clear();
    if (argv_.capacity() > kKeptArguments) std::vector<std::string_view>().swap(argv_);
    parser_.shrink();
    report_arguments();
}

void Connection::make_room() {
    const std::size_t held = in_end_ - in_start_;
    if (held == 0) {
        in_start_ = in_end_ = 0;
        // Give back memory once a large command has been consumed.
        if (in_capacity_ > kShrinkAbove) reallocate_input(kReadChunk);
        return;
    }
    if (in_start_ > 0 &&
        (in_capacity_ - in_end_ < kReadChunk / 2 || in_start_ > in_capacity_ / 2)) {
        // Compact: the unconsumed tail moves to the front. The parser keeps
        // offsets relative to the command start, so this is safe mid-command.
        std::memmove(in_.get(), in_.get() + in_start_, held);
        in_start_ = 0;
        in_end_ = held;
    }
    if (in_capacity_ - in_end_ >= kReadChunk / 2) return;
    // Nearly full of bytes received and still incomplete: grow geometrically
    // from what is held (at most 2 x (held + half a chunk)), never toward the
    // size a header announced. A client announcing 512 MB and trickling bytes
    // thus costs what it sent, not a doubling per read (a few such clients,
    // sending a hundred bytes in all, could otherwise take gigabytes).
    std::size_t capacity = std::max(kReadChunk, in_capacity_ * 2);
    const std::size_t expected = parser_.bytes_expected();  // from the command start
    if (expected > held) capacity = std::min(capacity, std::max(expected, held + kReadChunk));
    // Just past client-query-buffer-limit is enough to see that it was exceeded.
    const std::size_t limit = env_.config.client_query_buffer_limit;
    capacity = std::min(capacity, std::max(limit, held) + kReadChunk);
    if (capacity > in_capacity_) reallocate_input(capacity);
}

void Connection::read() {
    if (closing_) return;
    // Evicted for maxmemory-clients from another thread: its close is on
    // its way, and until then it reads nothing more, so its query buffer
    // does not grow past what the eviction counted.
    if (client_.evicted.load(std::memory_order_relaxed)) {
        close();
        return;
    }
    make_room();
    reading_ = true;
    start_read(asio::buffer(in_.get() + in_end_, std::min(in_capacity_ - in_end_, kMaxReadSize)));
}

void Connection::on_read(const error_code& error, std::size_t bytes) {
    reading_ = false;
    if (error || client_.evicted.load(std::memory_order_relaxed)) {
        close();
        return;
    }
    in_end_ += bytes;
    command::WorkerStats::bump(worker_.stats.net_input_bytes, bytes);
    command::WorkerStats::bump(worker_.stats.reads_processed);
    client_.last_interaction_ms.store(store::now_ms(), std::memory_order_relaxed);
    const std::size_t pending = in_end_ - in_start_;
    client_.query_buffer_used.store(pending, std::memory_order_relaxed);
    // Like Redis, the bytes held unprocessed count against the limit; the
    // buffer's capacity never exceeds them by more than make_room() allows.
    // Until a client that must authenticate has done so, the tighter
    // unauthenticated limit applies.
    const bool unauthenticated = parser_.limits().unauthenticated;
    if (pending > (unauthenticated ? env_.config.unauthenticated_query_buffer_limit
                                   : env_.config.client_query_buffer_limit)) {
        command::WorkerStats::bump(worker_.stats.query_buffer_limit_disconnections);
        spdlog::warn(
            "closing client id={} addr={}: query buffer {} bytes exceeds {}", client_.id,
            client_.address, pending,
            unauthenticated ? "unauthenticated-query-buffer-limit" : "client-query-buffer-limit");
        close();
        return;
    }
    need_more_ = false;
    if (feed_) {
        read_replica_input();
        return;
    }
    advance();
}

void Connection::advance() {
    if (closed_) return;
    if (blocked_ && deferred_arrived_) {
        blocked_ = deferred_arrived_ = false;
        client_.blocked.store(false, std::memory_order_relaxed);
        env_.clients.client_blocked(-1);
        client_.last_interaction_ms.store(store::now_ms(), std::memory_order_relaxed);
        // Counted like a reply written in dispatch (total_error_replies).
        const std::uint64_t errors_before = writer_.errors_written();
        command::ReplyWriter write_reply = std::move(deferred_reply_);
        deferred_reply_ = nullptr;
        write_reply(writer_);
        const std::uint64_t errors = writer_.errors_written() - errors_before;
        if (errors != 0) command::WorkerStats::bump(worker_.stats.error_replies, errors);
        report_buffers();
        enforce_output_limit();
    }
    if (!blocked_ && !closing_ && !need_more_ && in_start_ < in_end_) process();
    // PSYNC ran and every reply before it is written: become the feed.
    if (client_.psync_requested && out_.empty() && !closing_) {
        become_feed();
        return;
    }
    if (!pushes_.empty() && !writing_) {
        out_.append(pushes_);
        if (pushes_.capacity() > kShrinkAbove) {
            std::string().swap(pushes_);
        } else {
            pushes_.clear();
        }
    }
    if (!out_.empty()) {
        write();
    } else if (closing_) {
        close();
    } else if (!blocked_ && !reading_) {
        // (A read may still be in flight when a published message was
        // written meanwhile.)
        read();
    }
    // else: blocked with nothing to write; on_deferred_reply() resumes.
}

std::shared_ptr<command::ReplySink> Connection::suspend() {
    blocked_ = true;
    client_.blocked.store(true, std::memory_order_relaxed);
    env_.clients.client_blocked(1);
    return std::make_shared<PendingReply>(shared_from_this());
}

void Connection::on_deferred_reply(command::ReplyWriter write_reply) {
    if (closed_) return;  // killed or disconnected meanwhile: the reply has no reader
    deferred_reply_ = std::move(write_reply);
    deferred_arrived_ = true;
    // A write of earlier replies may still be in flight: on_write advances.
    if (!writing_) advance();
}

command::DispatchContext Connection::context(command::ClientSuspender* suspender,
                                             command::Slowlog* slowlog) {
    return command::DispatchContext{env_.registry, env_.keyspace, env_.config,   env_.settings,
                                    env_.services, client_,       worker_.stats, writer_,
                                    suspender,     slowlog};
}

void Connection::process() {
    command::DispatchContext ctx = context(this, &env_.slowlog);
    worker_.clear_appended();
    // Commands are timed from here, each from the end of the one before
    // (command::dispatch).
    std::uint64_t clock_mark = core::CommandClock::get().now();
    // Nothing after PSYNC runs as a command: the connection turns into the
    // replica's feed once the replies so far are written (advance()).
    while (!closing_ && !blocked_ && !client_.psync_requested && in_start_ < in_end_ &&
           out_.size() < kWriteHighWater) {
        const std::string_view input(in_.get() + in_start_, in_end_ - in_start_);
        const auto [status, consumed] = parser_.parse(input, argv_);
        if (status == resp::ParseStatus::incomplete) {
            need_more_ = true;
            break;
        }
        if (status == resp::ParseStatus::error) {
            // Answer, then close this connection only; the server carries on.
            writer_.error("ERR Protocol error: " + parser_.error_message());
            command::WorkerStats::bump(worker_.stats.protocol_errors);
            command::WorkerStats::bump(worker_.stats.error_replies);
            spdlog::info("protocol error from client id={} addr={}: {}", client_.id,
                         client_.address, parser_.error_message());
            closing_ = true;
            break;
        }
        if (!argv_.empty()) {
            // Counted before the command runs: its own -OOM check sees it.
            report_arguments();
            // Evicted for maxmemory-clients (by what it holds now, or from
            // another thread): as in Redis, its command does not run.
            if (client_.evicted.load(std::memory_order_relaxed)) {
                closing_ = true;
                break;
            }
            command::dispatch(env_.registry, ctx, argv_, clock_mark);
            if (client_.close_after_reply) closing_ = true;
            if (client_.authenticated && parser_.limits().unauthenticated) {
                parser_.set_limits(parser_limits(env_.config, ClientAuth::authenticated));
            }
        }
        in_start_ += consumed;
    }
    journal_wrote_ = journal_wrote_ || worker_.appended();
    if (in_start_ == in_end_) {
        in_start_ = in_end_ = 0;
        need_more_ = true;
        // Given back before the replies go out, so a client that has its
        // reply sees used_memory without the large command it sent.
        if (in_capacity_ > kShrinkAbove) reallocate_input(kReadChunk);
    }
    shrink_arguments();
    report_buffers();
    enforce_output_limit();
}

void Connection::close() {
    if (closed_) return;
    closed_ = true;
    closing_ = true;
    if (blocked_) {  // killed or disconnected while waiting: no longer blocked
        blocked_ = false;
        client_.blocked.store(false, std::memory_order_relaxed);
        env_.clients.client_blocked(-1);
    }
    close_transport();
    if (feed_) feed_->on_close();
    // Its channels and patterns forget it (a message published meanwhile
    // finds it closed and is dropped).
    command::SubscriptionState& subscriptions = client_.subscriptions;
    for (const std::string& channel : subscriptions.channels) {
        env_.services.pubsub.unsubscribe(channel, client_.id);
    }
    for (const std::string& pattern : subscriptions.patterns) {
        env_.services.pubsub.punsubscribe(pattern, client_.id);
    }
    subscriptions.channels.clear();
    subscriptions.patterns.clear();
    subscriptions.publish();
    if (tracked_) env_.pool.untrack(worker_, position_);
}

}  // namespace bloomery::net
