// A connection as a replica's feed (replication.hpp, proto/replication.md):
// PSYNC answered with +CONTINUE or +FULLRESYNC and a snapshot, then the
// journal's records as they are written; only REPLCONF runs from the
// replica, and no reply goes back.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>

#include "bloomery/core/ascii.hpp"
#include "bloomery/persist/journal.hpp"
#include "bloomery/persist/snapshot.hpp"
#include "connection.hpp"
#include "connection_feed.hpp"

namespace bloomery::net {

namespace asio = boost::asio;

std::uint64_t Connection::feed_floor() const {
    // Before the snapshot is through, where the stream will start; then what
    // the replica acknowledged (it resumes from there after a cut).
    return feed_online() ? client_.replica_ack_offset.load(std::memory_order_relaxed)
                         : feed_floor_.load(std::memory_order_relaxed);
}

void Connection::feed_input() {
    const std::uint64_t acked = client_.replica_ack_offset.load(std::memory_order_relaxed);
    // The replica's other direction is its stream: only REPLCONF (ACK) runs,
    // and no reply goes out. Any other command after PSYNC is dropped unrun:
    // its reply would land in the stream, a deferred one (WAIT, SAVE) later
    // and between two writes of it.
    command::Context ctx = context(nullptr, nullptr);
    while (!closing_ && in_start_ < in_end_) {
        std::size_t consumed = 0;
        const std::string_view input(in_.get() + in_start_, in_end_ - in_start_);
        const resp::ParseStatus status = parser_.parse(input, argv_, consumed);
        if (status == resp::ParseStatus::incomplete) break;
        if (status == resp::ParseStatus::error) {
            command::WorkerStats::bump(worker_.stats.protocol_errors);
            spdlog::warn("protocol error from replica {}: {}; closing its feed", client_.address,
                         parser_.error_message());
            closing_ = true;
            break;
        }
        if (!argv_.empty()) {
            if (core::iequals(argv_[0], "replconf")) {
                command::dispatch(server_.registry(), ctx, argv_);
            } else if (!feed_->dropped_command) {
                feed_->dropped_command = true;
                spdlog::warn(
                    "replica {} sent a command after PSYNC; dropped unrun (only REPLCONF "
                    "is read from a replica)",
                    client_.address);
            }
        }
        in_start_ += consumed;
    }
    if (in_start_ == in_end_) in_start_ = in_end_ = 0;
    out_.clear();
    report_buffers();
    if (client_.replica_ack_offset.load(std::memory_order_relaxed) != acked) {
        server_.replication_source().on_ack();
    }
    feed_pump();
}

void Connection::feed_wake() {
    if (!feed_waiting_.exchange(false)) return;
    asio::post(executor_, [self = shared_from_this()] { self->feed_pump(); });
}

void Connection::begin_feed() {
    ReplicationSource& source = server_.replication_source();
    persist::Journal* journal = server_.journal();
    client_.psync_requested = false;
    feed_ = std::make_unique<Feed>();
    client_.is_replica.store(true, std::memory_order_relaxed);
    client_.replica_ack_ms.store(store::now_ms(), std::memory_order_relaxed);
    feed_->replid = source.replid();
    if (journal != nullptr && source.can_continue(client_.psync_replid, client_.psync_offset)) {
        const auto offset = static_cast<std::uint64_t>(client_.psync_offset);
        feed_->offset = offset;
        feed_floor_.store(offset, std::memory_order_relaxed);
        client_.replica_ack_offset.store(offset, std::memory_order_relaxed);
        feed_->out = "+CONTINUE " + feed_->replid + "\r\n";
        feed_online_.store(true, std::memory_order_relaxed);
        spdlog::info("replica {} resumes at offset {} (partial resynchronization)", client_.address,
                     offset);
    } else {
        source.count_full_sync();
        // Until the snapshot's position is known, keep everything from here.
        feed_floor_.store(journal != nullptr ? journal->written() : 0, std::memory_order_relaxed);
        feed_->phase = Feed::Phase::awaiting_position;
        feed_->mark = new_replication_id();
        std::weak_ptr<Connection> weak = shared_from_this();
        feed_->pipe = std::make_shared<SnapshotPipe>([weak] {
            if (auto self = weak.lock()) self->feed_wake();
        });
        spdlog::info("replica {} asked for {} {}: sending a full snapshot", client_.address,
                     client_.psync_replid, client_.psync_offset);
        feed_->snapshotter = std::thread([pipe = feed_->pipe, &keyspace = server_.keyspace(),
                                          name = "replica " + client_.address] {
            persist::SaveStats stats;
            std::string error;
            const bool ok = persist::stream_snapshot(
                keyspace,
                [&pipe](const unsigned char* data, std::size_t size) {
                    return pipe->push(data, size);
                },
                [&pipe](std::uint64_t offset) { pipe->set_position(offset); }, name, stats, error);
            if (ok) {
                spdlog::info("{}: snapshot of {} filters, {} bytes, sent in {:.3f} s", name,
                             stats.keys, stats.bytes, stats.seconds);
            }
            pipe->finish(ok, error);
        });
    }
    source.add_feed(shared_from_this());
    feed_pump();
}

void Connection::end_feed() {
    if (feed_->pipe) feed_->pipe->cancel();
    server_.replication_source().remove_feed(
        this, client_.replica_ack_offset.load(std::memory_order_relaxed));
    spdlog::info("replica {} disconnected", client_.address);
}

void Connection::feed_fill() {
    Feed& feed = *feed_;
    for (int pass = 0; pass < 2 && feed.out.empty(); ++pass) {
        if (feed.phase == Feed::Phase::awaiting_position) {
            // done() first: the snapshot thread sets the position before it
            // finishes, so a snapshot found finished without one failed
            // before choosing its keys (asked the other way round, one that
            // set it and finished in between would read as failed).
            bool ok = false;
            std::string error;
            const bool finished = feed.pipe->done(ok, error);
            std::uint64_t offset = 0;
            if (feed.pipe->position_known(offset)) {
                feed.offset = offset;
                feed_floor_.store(offset, std::memory_order_relaxed);
                client_.replica_ack_offset.store(offset, std::memory_order_relaxed);
                feed.out = "+FULLRESYNC " + feed.replid + " " + std::to_string(offset) +
                           "\r\n$EOF:" + feed.mark + "\r\n";
                feed.phase = Feed::Phase::snapshot;
                return;
            }
            if (finished) {
                spdlog::warn("replica {}: {}", client_.address, error);
                closing_ = true;
                return;
            }
        } else if (feed.phase == Feed::Phase::snapshot) {
            feed.out = feed.pipe->take();
            if (!feed.out.empty()) return;
            bool ok = false;
            std::string error;
            if (feed.pipe->done(ok, error)) {
                if (!ok) {
                    spdlog::warn("replica {}: {}", client_.address, error);
                    closing_ = true;
                    return;
                }
                feed.out = feed.mark;
                feed.phase = Feed::Phase::stream;
                feed_online_.store(true, std::memory_order_relaxed);
                return;
            }
        } else {
            persist::Journal* journal = server_.journal();
            if (journal == nullptr) {
                closing_ = true;
                return;
            }
            const std::int64_t n =
                feed.reader.read(*journal, feed.offset, feed.chunk.data(), feed.chunk.size());
            if (n < 0) {
                spdlog::warn(
                    "replica {} fell behind what the journal keeps (offset {}); closing it, it "
                    "will resynchronize",
                    client_.address, feed.offset);
                closing_ = true;
                return;
            }
            if (n > 0) {
                feed.out.assign(feed.chunk.data(), static_cast<std::size_t>(n));
                feed.offset += static_cast<std::uint64_t>(n);
                return;
            }
        }
        // Nothing now: wait for a wake (journal written, snapshot piece),
        // then look once more in case it came before the flag was set.
        feed_waiting_.store(true, std::memory_order_seq_cst);
        if (pass == 0) {
            const bool ready =
                feed.phase == Feed::Phase::stream
                    ? (server_.journal() != nullptr && server_.journal()->written() > feed.offset)
                    : true;
            if (!ready || !feed_waiting_.exchange(false)) return;
        }
    }
}

void Connection::feed_pump() {
    if (closed_) return;
    if (!writing_) {
        feed_->sending.clear();
        if (feed_->out.empty() && !closing_) feed_fill();
        if (!feed_->out.empty()) {
            feed_->sending.swap(feed_->out);
            feed_->charge.set(feed_->chunk.capacity() + feed_->sending.capacity() +
                              feed_->out.capacity());
            writing_ = true;
            start_write(asio::buffer(feed_->sending));
        } else if (closing_) {
            close();
            return;
        }
    }
    if (!reading_ && !closing_) read();
}

}  // namespace bloomery::net
