// The primary's side of replication: the journal segments and snapshots it
// streams to replicas, their feeds, WAIT, and INFO replication's primary fields.

#include "bloomery/net/replication.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <random>
#include <system_error>

#include "bloomery/core/memory.hpp"
#include "bloomery/persist/snapshot.hpp"
#include "replica_feed.hpp"

namespace bloomery::net {

namespace asio = boost::asio;
using boost::system::error_code;

std::string new_replication_id() {
    std::random_device device;
    std::string id;
    id.reserve(40);
    while (id.size() < 40) {
        std::uint32_t word = device();
        for (int i = 0; i < 8 && id.size() < 40; ++i, word >>= 4)
            id += "0123456789abcdef"[word & 15];
    }
    return id;
}

// ---- JournalFileReader ----

JournalFileReader::~JournalFileReader() {
    if (fd_ >= 0) ::close(fd_);
}

bool JournalFileReader::open_for(persist::Journal& journal, std::uint64_t offset) {
    if (fd_ >= 0) {
        ::close(fd_);
        fd_ = -1;
    }
    const std::vector<persist::Journal::SegmentFile> segments = journal.segment_files();
    // The last segment starting at or before the offset holds it.
    std::size_t found = segments.size();
    for (std::size_t i = 0; i < segments.size(); ++i) {
        if (segments[i].start <= offset) found = i;
    }
    if (found == segments.size()) return false;
    fd_ = ::open(segments[found].path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) return false;
    start_ = segments[found].start;
    end_ = found + 1 < segments.size() ? segments[found + 1].start : ~0ull;
    return true;
}

std::int64_t JournalFileReader::read(persist::Journal& journal, std::uint64_t offset, char* out,
                                     std::size_t max) {
    const std::uint64_t written = journal.written();
    if (offset >= written) return 0;
    for (int attempt = 0; attempt < 2; ++attempt) {
        if (fd_ < 0 || offset < start_ || offset >= end_) {
            if (!open_for(journal, offset)) return -1;
        }
        const auto want = std::min<std::uint64_t>({max, written - offset, end_ - offset});
        const ssize_t n =
            ::pread(fd_, out, want,
                    static_cast<off_t>(persist::kJournalSegmentHeaderBytes + (offset - start_)));
        if (n > 0) return n;
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -1;
        // The segment ends here: a newer one starts at this offset (or the
        // writer is rewriting after a failed fdatasync: nothing yet).
        if (end_ == ~0ull) {
            end_ = offset;
            continue;
        }
        return 0;
    }
    return 0;
}

// ---- SnapshotPipe ----

bool SnapshotPipe::push(const unsigned char* data, std::size_t size) {
    {
        std::unique_lock lock(mutex_);
        room_.wait(lock, [this] { return cancelled_ || queued_ < kMaxQueuedBytes; });
        if (cancelled_) return false;
        chunks_.emplace_back(reinterpret_cast<const char*>(data), size);
        queued_ += size;
        // A replica's pending snapshot is its feed's output (INFO
        // used_memory, mem_clients_slaves), at most kMaxQueuedBytes.
        core::memory_add(core::MemoryUse::replica_buffers, static_cast<std::int64_t>(size));
    }
    wake_();
    return true;
}

void SnapshotPipe::set_position(std::uint64_t offset) {
    {
        std::lock_guard lock(mutex_);
        position_ = offset;
    }
    wake_();
}

void SnapshotPipe::finish(core::Status outcome) {
    {
        std::lock_guard lock(mutex_);
        outcome_ = std::move(outcome);
    }
    wake_();
}

std::string SnapshotPipe::take() {
    std::string out;
    {
        std::lock_guard lock(mutex_);
        if (chunks_.empty()) return out;
        out = std::move(chunks_.front());
        chunks_.pop_front();
        queued_ -= out.size();
        core::memory_add(core::MemoryUse::replica_buffers, -static_cast<std::int64_t>(out.size()));
    }
    room_.notify_all();
    return out;
}

std::optional<std::uint64_t> SnapshotPipe::position() const {
    std::lock_guard lock(mutex_);
    return position_;
}

std::optional<core::Status> SnapshotPipe::outcome() const {
    std::lock_guard lock(mutex_);
    if (!chunks_.empty()) return std::nullopt;
    return outcome_;
}

SnapshotPipe::~SnapshotPipe() {
    core::memory_add(core::MemoryUse::replica_buffers, -static_cast<std::int64_t>(queued_));
}

void SnapshotPipe::cancel() {
    {
        std::lock_guard lock(mutex_);
        cancelled_ = true;
    }
    room_.notify_all();
}

// ---- ReplicationSource ----

ReplicationSource::ReplicationSource(const core::Config& config, persist::Manager& persistence)
    : config_(config), persistence_(persistence), replid_(new_replication_id()) {
    // Made once at start, primary or replica: nothing of this process is
    // being received yet, so every sync file in --dir is a killed replica's.
    remove_stale_sync_files(config_.dir);
}

ReplicationSource::~ReplicationSource() = default;

std::string ReplicationSource::replid() const {
    std::lock_guard lock(mutex_);
    return replid_;
}

void ReplicationSource::renew_replid(std::optional<History> previous) {
    std::lock_guard lock(mutex_);
    replid_ = new_replication_id();
    shared_ = previous.has_value();
    previous_ = std::move(previous);
    departed_.clear();
}

bool ReplicationSource::history_shared() const {
    std::lock_guard lock(mutex_);
    return shared_;
}

std::optional<std::uint64_t> ReplicationSource::can_continue(const std::string& replid,
                                                             std::int64_t offset) {
    persist::Journal* journal = persistence_.journal();
    std::optional<std::uint64_t> from;
    if (journal != nullptr && offset >= 0) {
        const auto at = static_cast<std::uint64_t>(offset);
        {
            std::lock_guard lock(mutex_);
            if (replid == replid_) {
                from = at;
            } else if (previous_ && replid == previous_->replid && at == previous_->offset) {
                // Only the exact point: offsets of the old history before
                // it name no place in this server's stream.
                from = previous_->own_offset;
            }
        }
        const auto segments = journal->segment_files();
        if (from &&
            (segments.empty() || segments.front().start > *from || *from > journal->appended())) {
            from.reset();
        }
    }
    // "?" asks for a full synchronization: not a failed partial one.
    if (replid != "?") (from ? partial_ok_ : partial_err_).fetch_add(1, std::memory_order_relaxed);
    return from;
}

void ReplicationSource::count_full_sync() {
    full_syncs_.fetch_add(1, std::memory_order_relaxed);
}

void ReplicationSource::add_feed(const std::shared_ptr<ReplicaFeed>& feed) {
    {
        std::lock_guard lock(mutex_);
        feeds_.push_back(feed);
        shared_ = true;
    }
    // Keep the segments it needs from now on, before any snapshot drops them.
    update_floor();
}

void ReplicationSource::remove_feed(const ReplicaFeed* feed, std::uint64_t acked_offset) {
    std::lock_guard lock(mutex_);
    std::erase_if(feeds_, [feed](const std::weak_ptr<ReplicaFeed>& weak) {
        const auto live = weak.lock();
        return !live || live.get() == feed;
    });
    departed_.push_back({acked_offset, store::now_ms()});
}

std::vector<std::shared_ptr<ReplicaFeed>> ReplicationSource::live_feeds() {
    std::vector<std::shared_ptr<ReplicaFeed>> out;
    std::lock_guard lock(mutex_);
    for (const auto& weak : feeds_) {
        if (auto feed = weak.lock()) out.push_back(std::move(feed));
    }
    return out;
}

void ReplicationSource::close_feeds() {
    for (const auto& feed : live_feeds()) feed->request_close();
}

void ReplicationSource::on_written(std::uint64_t) {
    for (const auto& feed : live_feeds()) feed->wake();
}

std::int64_t ReplicationSource::acked_at_least(std::uint64_t target) {
    std::int64_t count = 0;
    for (const auto& feed : live_feeds()) {
        if (feed->online() &&
            feed->replica().replica_ack_offset.load(std::memory_order_relaxed) >= target) {
            ++count;
        }
    }
    return count;
}

void ReplicationSource::answer_waiters() {
    // Counting takes the feeds' lock: the waiters are taken out of mutex_
    // first, and those still waiting put back.
    std::vector<Waiter> waiting;
    {
        std::lock_guard lock(mutex_);
        if (waiters_.empty()) return;
        waiting.swap(waiters_);
    }
    const std::int64_t now = store::now_ms();
    std::vector<std::pair<std::function<void(std::int64_t)>, std::int64_t>> ready;
    std::vector<Waiter> keep;
    for (Waiter& waiter : waiting) {
        const std::int64_t acked = acked_at_least(waiter.target);
        const bool expired = waiter.deadline_ms != 0 && now >= waiter.deadline_ms;
        if (acked >= waiter.count || expired) {
            ready.emplace_back(std::move(waiter.done), acked);
        } else {
            keep.push_back(std::move(waiter));
        }
    }
    {
        std::lock_guard lock(mutex_);
        for (Waiter& waiter : keep) waiters_.push_back(std::move(waiter));
    }
    for (auto& [done, acked] : ready) done(acked);
}

void ReplicationSource::on_ack() {
    answer_waiters();
}

void ReplicationSource::wait(std::int64_t count, std::int64_t timeout_ms,
                             std::function<void(std::int64_t)> done, asio::io_context& timers) {
    persist::Journal* journal = persistence_.journal();
    // Every record appended before WAIT, any thread's (position() takes the
    // adds still in threads' buffers), must be acknowledged.
    const std::uint64_t target = journal != nullptr ? journal->position() : 0;
    const std::int64_t acked = acked_at_least(target);
    if (acked >= count || journal == nullptr) {
        done(acked);
        return;
    }
    const std::int64_t deadline = timeout_ms == 0 ? 0 : store::now_ms() + timeout_ms;
    {
        std::lock_guard lock(mutex_);
        waiters_.push_back({target, count, deadline, std::move(done)});
    }
    if (timeout_ms != 0) {
        // The cron checks every 100 ms; a timer answers on time.
        auto timer = std::make_shared<asio::steady_timer>(timers);
        timer->expires_after(std::chrono::milliseconds(timeout_ms));
        timer->async_wait([this, timer](const error_code&) { answer_waiters(); });
    }
    // An ACK may have come between the count and the registration.
    answer_waiters();
}

void ReplicationSource::cron() {
    persist::Journal* journal = persistence_.journal();
    const std::int64_t now = store::now_ms();
    if (journal != nullptr && !live_feeds().empty() &&
        now - last_ping_ms_ >= config_.repl_ping_replica_period_seconds * 1000) {
        // A keepalive through the stream itself, so a replica can tell a
        // silent primary from a dead one (--repl-timeout).
        journal->ping();
        last_ping_ms_ = now;
    }
    update_floor();
    answer_waiters();
}

void ReplicationSource::update_floor() {
    persist::Journal* journal = persistence_.journal();
    const std::int64_t now = store::now_ms();
    const std::vector<std::shared_ptr<ReplicaFeed>> feeds = live_feeds();
    // The oldest offset a replica may ask for: connected ones' acked (or
    // where their feed starts), and those that left recently; never more
    // than --repl-backlog-size behind.
    std::uint64_t floor = ~0ull;
    for (const auto& feed : feeds) floor = std::min(floor, feed->floor());
    {
        std::lock_guard lock(mutex_);
        std::erase_if(departed_, [&](const Departed& d) {
            return now - d.when_ms > config_.repl_backlog_ttl_seconds * 1000;
        });
        for (const Departed& d : departed_) floor = std::min(floor, d.offset);
    }
    if (journal != nullptr && floor != ~0ull) {
        const std::uint64_t written = journal->written();
        if (written > config_.repl_backlog_size) {
            floor = std::max(floor, written - config_.repl_backlog_size);
        }
    }
    persistence_.set_replication_floor(floor);
}

std::size_t ReplicationSource::replica_count() {
    return live_feeds().size();
}

std::size_t ReplicationSource::replicas_behind(std::uint64_t offset) {
    std::size_t behind = 0;
    for (const auto& feed : live_feeds()) {
        if (!feed->online() ||
            feed->replica().replica_ack_offset.load(std::memory_order_relaxed) < offset) {
            ++behind;
        }
    }
    return behind;
}

std::int64_t ReplicationSource::good_replicas(std::int64_t max_lag_seconds) {
    const std::int64_t now = store::now_ms();
    std::int64_t good = 0;
    for (const auto& feed : live_feeds()) {
        const std::int64_t acked = feed->replica().replica_ack_ms.load(std::memory_order_relaxed);
        if (feed->online() && (now - acked) / 1000 <= max_lag_seconds) ++good;
    }
    return good;
}

void ReplicationSource::fill_info(command::ReplicationInfo& info) {
    const std::int64_t now = store::now_ms();
    for (const auto& feed : live_feeds()) {
        const command::ClientState& client = feed->replica();
        command::ReplicaInfo replica;
        const std::string& address = client.address;
        const auto colon = address.find_last_of(':');
        replica.ip = colon == std::string::npos ? address : address.substr(0, colon);
        if (!replica.ip.empty() && replica.ip.front() == '[') {
            replica.ip = replica.ip.substr(1, replica.ip.size() - 2);
        }
        replica.port = client.replica_listening_port.load(std::memory_order_relaxed);
        replica.state = feed->online() ? "online" : "wait_bgsave";
        replica.offset = client.replica_ack_offset.load(std::memory_order_relaxed);
        const std::int64_t last = client.replica_ack_ms.load(std::memory_order_relaxed);
        replica.lag_seconds = last == 0 ? 0 : (now - last) / 1000;
        info.replicas.push_back(std::move(replica));
    }
    {
        std::lock_guard lock(mutex_);
        if (previous_) {
            info.replid2 = previous_->replid;
            info.second_offset = static_cast<std::int64_t>(previous_->offset);
        }
    }
    if (!info.replica) {
        info.replid = replid();
        if (persist::Journal* journal = persistence_.journal()) {
            info.offset = journal->appended();
            const auto segments = journal->segment_files();
            info.backlog_active = !segments.empty();
            if (!segments.empty()) info.backlog_first_offset = segments.front().start;
            info.backlog_bytes = config_.repl_backlog_size;
        }
    }
    info.full_syncs = full_syncs_.load(std::memory_order_relaxed);
    info.partial_syncs_ok = partial_ok_.load(std::memory_order_relaxed);
    info.partial_syncs_err = partial_err_.load(std::memory_order_relaxed);
}

}  // namespace bloomery::net
