#include "connection.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "bloomery/command/acl.hpp"

namespace bloomery::net {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// Read size: 16 KiB like Redis's PROTO_IOBUF_LEN; the buffer grows beyond it
// only for commands larger than that.
constexpr std::size_t kReadChunk = 16 * 1024;
// Replies buffered before the connection stops running commands and writes:
// keeps one pipelined burst from building an unbounded output buffer.
constexpr std::size_t kWriteHighWater = 256 * 1024;

std::string endpoint_text(const asio::ip::tcp::endpoint& endpoint) {
    const auto address = endpoint.address();
    std::string text = address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
    return text + ":" + std::to_string(endpoint.port());
}

// Until a client that must authenticate has done so, Redis's tighter bounds
// apply (10 arguments, 16 KB bulks, 1 MB buffered): an anonymous peer cannot
// make the server hold much. process() lifts them after a successful AUTH.
resp::ParserLimits parser_limits(const core::Config& config, bool unauthenticated) {
    resp::ParserLimits limits{config.proto_max_bulk_len, config.proto_max_inline_len,
                              config.proto_max_multibulk_len};
    limits.unauthenticated = unauthenticated;
    limits.unauthenticated_max_multibulk_length = config.unauthenticated_max_multibulk_len;
    limits.unauthenticated_max_bulk_length = config.unauthenticated_max_bulk_len;
    return limits;
}

}  // namespace

Connection::Connection(Server& server, Server::Worker& worker, asio::ip::tcp::socket socket,
                       std::int64_t id)
    : server_(server),
      worker_(worker),
      socket_(std::move(socket)),
      parser_(parser_limits(server.config(), server.registry().acl().auth_required())),
      writer_(out_),
      in_(kReadChunk) {
    client_.id = id;
    error_code ignored;
    const auto remote = socket_.remote_endpoint(ignored);
    if (!ignored) client_.address = endpoint_text(remote);
    const auto local = socket_.local_endpoint(ignored);
    if (!ignored) client_.local_address = endpoint_text(local);
    client_.created_ms = store::now_ms();
    client_.last_interaction_ms.store(client_.created_ms, std::memory_order_relaxed);
    socket_.set_option(asio::ip::tcp::no_delay(true), ignored);
}

void Connection::start() {
    tracked_ = server_.track(worker_, shared_from_this());
    read();
}

void Connection::request_close() {
    asio::post(socket_.get_executor(), [self = shared_from_this()] {
        // Replies being written still go out; the socket closes after them.
        if (self->writing_) {
            self->closing_ = true;
        } else {
            self->close();
        }
    });
}

std::string Connection::describe() const {
    return command::format_client_line(client_, store::now_ms(),
                                       query_bytes_.load(std::memory_order_relaxed),
                                       output_bytes_.load(std::memory_order_relaxed));
}

void Connection::make_room() {
    if (in_start_ == in_end_) {
        in_start_ = in_end_ = 0;
    } else if (in_start_ > 0 &&
               (in_.size() - in_end_ < kReadChunk / 2 || in_start_ > in_.size() / 2)) {
        // Compact: the unconsumed tail moves to the front. The parser keeps
        // offsets relative to the command start, so this is safe mid-command.
        std::copy(in_.begin() + static_cast<std::ptrdiff_t>(in_start_),
                  in_.begin() + static_cast<std::ptrdiff_t>(in_end_), in_.begin());
        in_end_ -= in_start_;
        in_start_ = 0;
    }
    std::size_t wanted = in_end_ + kReadChunk;
    // A large bulk argument: grow toward its announced size by doubling, so
    // memory follows the bytes that actually arrive; a client announcing
    // 512 MB and sending nothing costs no more than what it sent (times two).
    const std::size_t expected = parser_.bytes_expected();
    if (expected > 0 && in_start_ + expected > wanted) {
        wanted = std::min(in_start_ + expected, std::max(wanted, in_.size() * 2));
    }
    if (wanted > in_.size()) {
        in_.resize(wanted);
    } else if (in_end_ == 0 && in_.size() > 4 * kReadChunk) {
        // Give back memory once a large command has been consumed.
        in_.resize(kReadChunk);
        in_.shrink_to_fit();
    }
}

void Connection::read() {
    if (closing_) return;
    make_room();
    socket_.async_read_some(
        asio::buffer(in_.data() + in_end_, in_.size() - in_end_),
        [self = shared_from_this()](const error_code& error, std::size_t bytes) {
            self->on_read(error, bytes);
        });
}

void Connection::on_read(const error_code& error, std::size_t bytes) {
    if (error) {
        close();
        return;
    }
    in_end_ += bytes;
    command::WorkerStats::bump(worker_.stats.net_input_bytes, bytes);
    client_.last_interaction_ms.store(store::now_ms(), std::memory_order_relaxed);
    const std::size_t pending = in_end_ - in_start_;
    query_bytes_.store(pending, std::memory_order_relaxed);
    const bool unauthenticated = parser_.limits().unauthenticated;
    if (pending > (unauthenticated ? server_.config().unauthenticated_query_buffer_limit
                                   : server_.config().client_query_buffer_limit)) {
        spdlog::warn(
            "closing client id={} addr={}: query buffer {} bytes exceeds {}", client_.id,
            client_.address, pending,
            unauthenticated ? "unauthenticated-query-buffer-limit" : "client-query-buffer-limit");
        close();
        return;
    }
    need_more_ = false;
    process();
    if (!out_.empty()) {
        write();
    } else if (closing_) {
        close();
    } else {
        read();
    }
}

void Connection::process() {
    command::Context ctx{server_.registry(),
                         server_.keyspace(),
                         server_.config(),
                         server_,
                         client_,
                         worker_.stats,
                         writer_};
    while (!closing_ && in_start_ < in_end_ && out_.size() < kWriteHighWater) {
        std::size_t consumed = 0;
        const std::string_view input(in_.data() + in_start_, in_end_ - in_start_);
        const resp::ParseStatus status = parser_.parse(input, argv_, consumed);
        if (status == resp::ParseStatus::incomplete) {
            need_more_ = true;
            break;
        }
        if (status == resp::ParseStatus::error) {
            // Answer, then close this connection only; the server carries on.
            writer_.error("ERR Protocol error: " + parser_.error_message());
            command::WorkerStats::bump(worker_.stats.protocol_errors);
            spdlog::info("protocol error from client id={} addr={}: {}", client_.id,
                         client_.address, parser_.error_message());
            closing_ = true;
            break;
        }
        if (!argv_.empty()) {
            command::dispatch(server_.registry(), ctx, argv_);
            if (client_.close_after_reply) closing_ = true;
            if (client_.authenticated && parser_.limits().unauthenticated) {
                parser_.set_limits(parser_limits(server_.config(), false));
            }
        }
        in_start_ += consumed;
    }
    if (in_start_ == in_end_) {
        in_start_ = in_end_ = 0;
        need_more_ = true;
    }
    query_bytes_.store(in_end_ - in_start_, std::memory_order_relaxed);
    output_bytes_.store(out_.size(), std::memory_order_relaxed);
    if (out_.size() > server_.config().client_output_buffer_limit) {
        spdlog::warn(
            "closing client id={} addr={}: reply of {} bytes exceeds "
            "client-output-buffer-limit",
            client_.id, client_.address, out_.size());
        out_.clear();
        closing_ = true;
    }
}

void Connection::write() {
    writing_ = true;
    asio::async_write(socket_, asio::buffer(out_),
                      [self = shared_from_this()](const error_code& error, std::size_t bytes) {
                          self->on_write(error, bytes);
                      });
}

void Connection::on_write(const error_code& error, std::size_t bytes) {
    writing_ = false;
    if (error) {
        close();
        return;
    }
    command::WorkerStats::bump(worker_.stats.net_output_bytes, bytes);
    // Keep the buffer's capacity for the next batch, unless one huge reply
    // (a SCANDUMP chunk) made it large.
    if (out_.capacity() > 1024 * 1024) {
        std::string().swap(out_);
    } else {
        out_.clear();
    }
    output_bytes_.store(0, std::memory_order_relaxed);
    if (closing_) {
        close();
        return;
    }
    if (!need_more_ && in_start_ < in_end_) {
        // Commands are still buffered (we stopped at the high-water mark).
        process();
        if (!out_.empty()) {
            write();
            return;
        }
        if (closing_) {
            close();
            return;
        }
    }
    read();
}

void Connection::close() {
    if (closed_) return;
    closed_ = true;
    closing_ = true;
    error_code ignored;
    socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    server_.untrack(worker_, tracked_);
}

}  // namespace bloomery::net
