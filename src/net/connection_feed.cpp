// The connection as a replica's feed transport (replica_feed.hpp): once
// PSYNC is answered, the feed writes through this connection, and the
// commands the replica sends (REPLCONF ACK) are parsed here and handed to it.

#include <spdlog/spdlog.h>

#include "connection.hpp"

namespace bloomery::net {

namespace asio = boost::asio;

void Connection::become_feed() {
    FeedTransport& transport = *this;
    feed_ = std::make_unique<ReplicaFeed>(
        transport,
        FeedSources{env_.config, env_.settings, env_.keyspace, env_.replication, env_.persistence});
    feed_->start();
}

void Connection::read_replica_input() {
    while (!closing_ && in_start_ < in_end_) {
        const std::string_view input(in_.get() + in_start_, in_end_ - in_start_);
        const auto [status, consumed] = parser_.parse(input, argv_);
        if (status == resp::ParseStatus::incomplete) break;
        if (status == resp::ParseStatus::error) {
            command::WorkerStats::bump(worker_.stats.protocol_errors);
            spdlog::warn("protocol error from replica {}: {}; closing its feed", client_.address,
                         parser_.error_message());
            closing_ = true;
            break;
        }
        if (!argv_.empty()) feed_->on_command(argv_);
        in_start_ += consumed;
    }
    if (in_start_ == in_end_) in_start_ = in_end_ = 0;
    out_.clear();  // REPLCONF's replies: nothing goes back to a replica
    report_buffers();
    feed_->on_input_end();
}

void Connection::post(std::function<void()> work) {
    asio::post(executor_, [self = shared_from_this(), work = std::move(work)] { work(); });
}

void Connection::send(asio::const_buffer bytes) {
    writing_ = true;
    start_write(bytes);
}

void Connection::keep_reading() {
    if (!reading_ && !closing_) read();
}

void Connection::run_command(command::Args argv) {
    command::DispatchContext ctx = context(nullptr, nullptr);
    command::dispatch(env_.registry, ctx, argv);
}

void Connection::close_if_over_output_limit(const core::OutputBufferLimit& limit,
                                            std::uint64_t pending) {
    if (output_limit_reached(limit, pending)) {
        close_for_output_limit(pending, OutputLimitClose::now);
    }
}

}  // namespace bloomery::net
