// A replica's feed (replica_feed.hpp, proto/replication.md).

#include "replica_feed.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>

#include "bloomery/core/ascii.hpp"
#include "bloomery/persist/journal.hpp"
#include "bloomery/persist/snapshot.hpp"

namespace bloomery::net {

namespace asio = boost::asio;

ReplicaFeed::ReplicaFeed(FeedTransport& transport, const FeedSources& sources)
    : transport_(transport), replica_(transport.replica()), sources_(sources) {}

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
    return online() ? replica_.replica_ack_offset.load(std::memory_order_relaxed)
                    : floor_.load(std::memory_order_relaxed);
}

std::uint64_t ReplicaFeed::pending_bytes() const {
    if (phase_ == Phase::awaiting_position) return 0;
    persist::Journal* log = journal();
    const std::uint64_t written = log != nullptr ? log->written() : offset_;
    std::uint64_t pending = written > offset_ ? written - offset_ : 0;
    if (phase_ == Phase::stream) pending += sending_.size() + out_.size();
    return pending;
}

void ReplicaFeed::check_output_limit() {
    const std::uint64_t pending = pending_bytes();
    replica_.output_buffer_used.store(pending, std::memory_order_relaxed);
    const core::Config& config = sources_.config;
    core::OutputBufferLimit limit =
        sources_.settings.client_output_buffer_limits().get(core::ClientClass::replica);
    if (limit.hard_bytes != 0)
        limit.hard_bytes = std::max(limit.hard_bytes, config.repl_backlog_size);
    transport_.close_if_over_output_limit(limit, pending);
}

void ReplicaFeed::on_command(command::Args argv) {
    // The replica's other direction is its stream: only REPLCONF (ACK) runs,
    // and no reply goes out. Any other command after PSYNC is dropped unrun:
    // its reply would land in the stream, a deferred one (WAIT, SAVE) later
    // and between two writes of it.
    if (core::iequals(argv[0], "replconf")) {
        const std::uint64_t acked = replica_.replica_ack_offset.load(std::memory_order_relaxed);
        transport_.run_command(argv);
        if (replica_.replica_ack_offset.load(std::memory_order_relaxed) != acked) {
            acknowledged_ = true;
        }
    } else if (!dropped_command_) {
        dropped_command_ = true;
        spdlog::warn(
            "replica {} sent a command after PSYNC; dropped unrun (only REPLCONF is read from a "
            "replica)",
            replica_.address);
    }
}

void ReplicaFeed::on_input_end() {
    if (acknowledged_) {
        acknowledged_ = false;
        sources_.source.on_ack();
    }
    pump();
}

void ReplicaFeed::wake() {
    if (!waiting_.exchange(false)) return;
    transport_.post([this] { pump(); });
}

void ReplicaFeed::start() {
    ReplicationSource& source = sources_.source;
    replica_.psync_requested = false;
    replica_.is_replica.store(true, std::memory_order_relaxed);
    replica_.replica_ack_ms.store(store::now_ms(), std::memory_order_relaxed);
    replid_ = source.replid();
    std::optional<std::uint64_t> from;
    if (journal() != nullptr)
        from = source.can_continue(replica_.psync_replid, replica_.psync_offset);
    if (from) {
        resume(*from);
    } else {
        begin_full_copy();
    }
    // The source holds the feed as long as the connection that owns it.
    source.add_feed(std::shared_ptr<ReplicaFeed>(transport_.keep_alive(), this));
    pump();
}

void ReplicaFeed::resume(std::uint64_t offset) {
    offset_ = offset;
    floor_.store(offset, std::memory_order_relaxed);
    replica_.replica_ack_offset.store(offset, std::memory_order_relaxed);
    // A replica resumed from this server's second id continues at another
    // offset than it asked for (proto/replication.md): the answer says where.
    out_ = "+CONTINUE " + replid_;
    if (offset != static_cast<std::uint64_t>(replica_.psync_offset)) {
        out_ += " " + std::to_string(offset);
    }
    out_ += "\r\n";
    online_.store(true, std::memory_order_relaxed);
    spdlog::info("replica {} resumes at offset {} (partial resynchronization)", replica_.address,
                 offset);
}

void ReplicaFeed::begin_full_copy() {
    sources_.source.count_full_sync();
    // Until the snapshot's position is known, keep everything from here.
    persist::Journal* log = journal();
    floor_.store(log != nullptr ? log->written() : 0, std::memory_order_relaxed);
    phase_ = Phase::awaiting_position;
    mark_ = new_replication_id();
    std::weak_ptr<void> alive = transport_.keep_alive();
    pipe_ = std::make_shared<SnapshotPipe>([alive, this] {
        if (auto held = alive.lock()) wake();
    });
    spdlog::info("replica {} asked for {} {}: sending a full snapshot", replica_.address,
                 replica_.psync_replid, replica_.psync_offset);
    snapshotter_ = std::thread([pipe = pipe_, &keyspace = sources_.keyspace,
                                name = "replica " + replica_.address] {
        const core::Result<persist::SaveStats> sent = persist::stream_snapshot(
            keyspace,
            [&pipe](const unsigned char* data, std::size_t size) { return pipe->push(data, size); },
            [&pipe](std::uint64_t offset) { pipe->set_position(offset); }, name);
        if (sent) {
            spdlog::info("{}: snapshot of {} filters, {} bytes, sent in {:.3f} s", name, sent->keys,
                         sent->bytes, sent->seconds);
        }
        pipe->finish(sent ? core::Status() : sent.failure());
    });
}

void ReplicaFeed::on_close() {
    closed_ = true;
    if (pipe_) pipe_->cancel();
    sources_.source.remove_feed(this, replica_.replica_ack_offset.load(std::memory_order_relaxed));
    spdlog::info("replica {} disconnected", replica_.address);
}

bool ReplicaFeed::fill_position() {
    // outcome() first: the snapshot thread sets the position before it
    // finishes, so a snapshot found finished without one failed before
    // choosing its keys (asked the other way round, one that set it and
    // finished in between would read as failed).
    const std::optional<core::Status> outcome = pipe_->outcome();
    if (const std::optional<std::uint64_t> position = pipe_->position()) {
        const std::uint64_t offset = *position;
        offset_ = offset;
        floor_.store(offset, std::memory_order_relaxed);
        replica_.replica_ack_offset.store(offset, std::memory_order_relaxed);
        out_ =
            "+FULLRESYNC " + replid_ + " " + std::to_string(offset) + "\r\n$EOF:" + mark_ + "\r\n";
        phase_ = Phase::snapshot;
        return true;
    }
    if (!outcome) return false;
    spdlog::warn("replica {}: {}", replica_.address, outcome->error());
    transport_.mark_closing();
    return true;
}

bool ReplicaFeed::fill_snapshot() {
    out_ = pipe_->take();
    if (!out_.empty()) return true;
    const std::optional<core::Status> outcome = pipe_->outcome();
    if (!outcome) return false;
    if (!*outcome) {
        spdlog::warn("replica {}: {}", replica_.address, outcome->error());
        transport_.mark_closing();
        return true;
    }
    out_ = mark_;
    phase_ = Phase::stream;
    online_.store(true, std::memory_order_relaxed);
    return true;
}

bool ReplicaFeed::fill_stream() {
    persist::Journal* log = journal();
    if (log == nullptr) {
        transport_.mark_closing();
        return true;
    }
    const std::int64_t n = reader_.read(*log, offset_, chunk_.data(), chunk_.size());
    if (n < 0) {
        spdlog::warn(
            "replica {} fell behind what the journal keeps (offset {}); closing it, it will "
            "resynchronize",
            replica_.address, offset_);
        transport_.mark_closing();
        return true;
    }
    if (n == 0) return false;
    out_.assign(chunk_.data(), static_cast<std::size_t>(n));
    offset_ += static_cast<std::uint64_t>(n);
    return true;
}

void ReplicaFeed::fill() {
    for (int pass = 0; pass < 2 && out_.empty(); ++pass) {
        const bool filled = phase_ == Phase::awaiting_position ? fill_position()
                            : phase_ == Phase::snapshot        ? fill_snapshot()
                                                               : fill_stream();
        if (filled) return;
        // Nothing now: wait for a wake (journal written, snapshot piece),
        // then look once more in case it came before the flag was set.
        waiting_.store(true, std::memory_order_seq_cst);
        if (pass == 0) {
            persist::Journal* log = journal();
            const bool ready =
                phase_ == Phase::stream ? (log != nullptr && log->written() > offset_) : true;
            if (!ready || !waiting_.exchange(false)) return;
        }
    }
}

void ReplicaFeed::pump() {
    if (closed_) return;
    if (!transport_.sending()) {
        sending_.clear();
        if (out_.empty() && !transport_.closing()) fill();
        if (!out_.empty()) {
            sending_.swap(out_);
            charge_.set(chunk_.capacity() + sending_.capacity() + out_.capacity());
            transport_.send(asio::buffer(sending_));
        } else if (transport_.closing()) {
            transport_.close();
            return;
        }
    }
    transport_.keep_reading();
}

}  // namespace bloomery::net
