// A replica's feed (replica_feed.hpp, proto/replication.md).

#include "replica_feed.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>

#include "bloomery/core/ascii.hpp"
#include "bloomery/persist/journal.hpp"
#include "bloomery/persist/snapshot.hpp"
#include "connection.hpp"

namespace bloomery::net {

namespace asio = boost::asio;

ReplicaFeed::~ReplicaFeed() {
    if (pipe_) pipe_->cancel();
    if (!snapshotter_.joinable()) return;
    // The snapshot thread itself may drop the last reference (its wake call
    // holds one for a moment): it is ending, let it end alone.
    if (snapshotter_.get_id() == std::this_thread::get_id()) {
        snapshotter_.detach();
    } else {
        snapshotter_.join();
    }
}

std::uint64_t ReplicaFeed::floor() const {
    // Before the snapshot is through, where the stream will start; then what
    // the replica acknowledged (it resumes from there after a cut).
    return online() ? conn_.client_.replica_ack_offset.load(std::memory_order_relaxed)
                    : floor_.load(std::memory_order_relaxed);
}

std::uint64_t ReplicaFeed::pending_bytes() const {
    if (phase_ == Phase::awaiting_position) return 0;
    persist::Journal* journal = conn_.server_.journal();
    const std::uint64_t written = journal != nullptr ? journal->written() : offset_;
    std::uint64_t pending = written > offset_ ? written - offset_ : 0;
    if (phase_ == Phase::stream) pending += sending_.size() + out_.size();
    return pending;
}

void ReplicaFeed::check_output_limit() {
    const std::uint64_t pending = pending_bytes();
    conn_.client_.output_buffer_used.store(pending, std::memory_order_relaxed);
    const core::Config& config = conn_.server_.config();
    core::OutputBufferLimit limit =
        config.client_output_buffer_limits.get(core::ClientClass::replica);
    if (limit.hard_bytes != 0)
        limit.hard_bytes = std::max(limit.hard_bytes, config.repl_backlog_size);
    if (conn_.output_limit_reached(limit, pending)) conn_.close_for_output_limit(pending);
}

void ReplicaFeed::on_input() {
    const std::uint64_t acked = conn_.client_.replica_ack_offset.load(std::memory_order_relaxed);
    // The replica's other direction is its stream: only REPLCONF (ACK) runs,
    // and no reply goes out. Any other command after PSYNC is dropped unrun:
    // its reply would land in the stream, a deferred one (WAIT, SAVE) later
    // and between two writes of it.
    command::DispatchContext ctx = conn_.context(nullptr, nullptr);
    while (!conn_.closing_ && conn_.in_start_ < conn_.in_end_) {
        const std::string_view input(conn_.in_.get() + conn_.in_start_,
                                     conn_.in_end_ - conn_.in_start_);
        const auto [status, consumed] = conn_.parser_.parse(input, conn_.argv_);
        if (status == resp::ParseStatus::incomplete) break;
        if (status == resp::ParseStatus::error) {
            command::WorkerStats::bump(conn_.worker_.stats.protocol_errors);
            spdlog::warn("protocol error from replica {}: {}; closing its feed",
                         conn_.client_.address, conn_.parser_.error_message());
            conn_.closing_ = true;
            break;
        }
        if (!conn_.argv_.empty()) {
            if (core::iequals(conn_.argv_[0], "replconf")) {
                command::dispatch(conn_.server_.registry(), ctx, conn_.argv_);
            } else if (!dropped_command_) {
                dropped_command_ = true;
                spdlog::warn(
                    "replica {} sent a command after PSYNC; dropped unrun (only REPLCONF "
                    "is read from a replica)",
                    conn_.client_.address);
            }
        }
        conn_.in_start_ += consumed;
    }
    if (conn_.in_start_ == conn_.in_end_) conn_.in_start_ = conn_.in_end_ = 0;
    conn_.out_.clear();
    conn_.report_buffers();
    if (conn_.client_.replica_ack_offset.load(std::memory_order_relaxed) != acked) {
        conn_.server_.replication_source().on_ack();
    }
    pump();
}

void ReplicaFeed::wake() {
    if (!waiting_.exchange(false)) return;
    asio::post(conn_.executor_, [self = conn_.shared_from_this()] { self->feed_->pump(); });
}

void ReplicaFeed::start() {
    ReplicationSource& source = conn_.server_.replication_source();
    persist::Journal* journal = conn_.server_.journal();
    conn_.client_.psync_requested = false;
    conn_.client_.is_replica.store(true, std::memory_order_relaxed);
    conn_.client_.replica_ack_ms.store(store::now_ms(), std::memory_order_relaxed);
    replid_ = source.replid();
    if (journal != nullptr &&
        source.can_continue(conn_.client_.psync_replid, conn_.client_.psync_offset)) {
        const auto offset = static_cast<std::uint64_t>(conn_.client_.psync_offset);
        offset_ = offset;
        floor_.store(offset, std::memory_order_relaxed);
        conn_.client_.replica_ack_offset.store(offset, std::memory_order_relaxed);
        out_ = "+CONTINUE " + replid_ + "\r\n";
        online_.store(true, std::memory_order_relaxed);
        spdlog::info("replica {} resumes at offset {} (partial resynchronization)",
                     conn_.client_.address, offset);
    } else {
        source.count_full_sync();
        // Until the snapshot's position is known, keep everything from here.
        floor_.store(journal != nullptr ? journal->written() : 0, std::memory_order_relaxed);
        phase_ = Phase::awaiting_position;
        mark_ = new_replication_id();
        std::weak_ptr<Connection> weak = conn_.shared_from_this();
        pipe_ = std::make_shared<SnapshotPipe>([weak] {
            if (auto self = weak.lock()) self->feed_wake();
        });
        spdlog::info("replica {} asked for {} {}: sending a full snapshot", conn_.client_.address,
                     conn_.client_.psync_replid, conn_.client_.psync_offset);
        snapshotter_ = std::thread([pipe = pipe_, &keyspace = conn_.server_.keyspace(),
                                    name = "replica " + conn_.client_.address] {
            const core::Result<persist::SaveStats> sent = persist::stream_snapshot(
                keyspace,
                [&pipe](const unsigned char* data, std::size_t size) {
                    return pipe->push(data, size);
                },
                [&pipe](std::uint64_t offset) { pipe->set_position(offset); }, name);
            if (sent) {
                spdlog::info("{}: snapshot of {} filters, {} bytes, sent in {:.3f} s", name,
                             sent->keys, sent->bytes, sent->seconds);
            }
            pipe->finish(sent.ok(), sent.ok() ? std::string() : sent.error());
        });
    }
    source.add_feed(conn_.shared_from_this());
    pump();
}

void ReplicaFeed::end() {
    if (pipe_) pipe_->cancel();
    conn_.server_.replication_source().remove_feed(
        &conn_, conn_.client_.replica_ack_offset.load(std::memory_order_relaxed));
    spdlog::info("replica {} disconnected", conn_.client_.address);
}

void ReplicaFeed::fill() {
    for (int pass = 0; pass < 2 && out_.empty(); ++pass) {
        if (phase_ == Phase::awaiting_position) {
            // done() first: the snapshot thread sets the position before it
            // finishes, so a snapshot found finished without one failed
            // before choosing its keys (asked the other way round, one that
            // set it and finished in between would read as failed).
            bool ok = false;
            std::string error;
            const bool finished = pipe_->done(ok, error);
            std::uint64_t offset = 0;
            if (pipe_->position_known(offset)) {
                offset_ = offset;
                floor_.store(offset, std::memory_order_relaxed);
                conn_.client_.replica_ack_offset.store(offset, std::memory_order_relaxed);
                out_ = "+FULLRESYNC " + replid_ + " " + std::to_string(offset) +
                       "\r\n$EOF:" + mark_ + "\r\n";
                phase_ = Phase::snapshot;
                return;
            }
            if (finished) {
                spdlog::warn("replica {}: {}", conn_.client_.address, error);
                conn_.closing_ = true;
                return;
            }
        } else if (phase_ == Phase::snapshot) {
            out_ = pipe_->take();
            if (!out_.empty()) return;
            bool ok = false;
            std::string error;
            if (pipe_->done(ok, error)) {
                if (!ok) {
                    spdlog::warn("replica {}: {}", conn_.client_.address, error);
                    conn_.closing_ = true;
                    return;
                }
                out_ = mark_;
                phase_ = Phase::stream;
                online_.store(true, std::memory_order_relaxed);
                return;
            }
        } else {
            persist::Journal* journal = conn_.server_.journal();
            if (journal == nullptr) {
                conn_.closing_ = true;
                return;
            }
            const std::int64_t n = reader_.read(*journal, offset_, chunk_.data(), chunk_.size());
            if (n < 0) {
                spdlog::warn(
                    "replica {} fell behind what the journal keeps (offset {}); closing it, it "
                    "will resynchronize",
                    conn_.client_.address, offset_);
                conn_.closing_ = true;
                return;
            }
            if (n > 0) {
                out_.assign(chunk_.data(), static_cast<std::size_t>(n));
                offset_ += static_cast<std::uint64_t>(n);
                return;
            }
        }
        // Nothing now: wait for a wake (journal written, snapshot piece),
        // then look once more in case it came before the flag was set.
        waiting_.store(true, std::memory_order_seq_cst);
        if (pass == 0) {
            const bool ready = phase_ == Phase::stream
                                   ? (conn_.server_.journal() != nullptr &&
                                      conn_.server_.journal()->written() > offset_)
                                   : true;
            if (!ready || !waiting_.exchange(false)) return;
        }
    }
}

void ReplicaFeed::pump() {
    if (conn_.closed_) return;
    if (!conn_.writing_) {
        sending_.clear();
        if (out_.empty() && !conn_.closing_) fill();
        if (!out_.empty()) {
            sending_.swap(out_);
            charge_.set(chunk_.capacity() + sending_.capacity() + out_.capacity());
            conn_.writing_ = true;
            conn_.start_write(asio::buffer(sending_));
        } else if (conn_.closing_) {
            conn_.close();
            return;
        }
    }
    if (!conn_.reading_ && !conn_.closing_) conn_.read();
}

}  // namespace bloomery::net
