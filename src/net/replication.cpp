#include "bloomery/net/replication.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>

#include "bloomery/core/memory.hpp"
#include "bloomery/persist/snapshot.hpp"
#include "connection.hpp"

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
        const std::uint64_t want = std::min<std::uint64_t>({max, written - offset, end_ - offset});
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
        // A replica's pending snapshot is its connection's output (INFO
        // used_memory), at most kMaxQueuedBytes.
        core::memory_add(core::MemoryUse::output_buffers, static_cast<std::int64_t>(size));
    }
    wake_();
    return true;
}

void SnapshotPipe::set_position(std::uint64_t offset) {
    {
        std::lock_guard lock(mutex_);
        position_ = offset;
        have_position_ = true;
    }
    wake_();
}

void SnapshotPipe::finish(bool ok, std::string error) {
    {
        std::lock_guard lock(mutex_);
        finished_ = true;
        ok_ = ok;
        error_ = std::move(error);
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
        core::memory_add(core::MemoryUse::output_buffers, -static_cast<std::int64_t>(out.size()));
    }
    room_.notify_all();
    return out;
}

bool SnapshotPipe::position_known(std::uint64_t& offset) const {
    std::lock_guard lock(mutex_);
    offset = position_;
    return have_position_;
}

bool SnapshotPipe::done(bool& ok, std::string& error) const {
    std::lock_guard lock(mutex_);
    if (!finished_ || !chunks_.empty()) return false;
    ok = ok_;
    error = error_;
    return true;
}

SnapshotPipe::~SnapshotPipe() {
    core::memory_add(core::MemoryUse::output_buffers, -static_cast<std::int64_t>(queued_));
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
    : config_(config), persistence_(persistence), replid_(new_replication_id()) {}

ReplicationSource::~ReplicationSource() = default;

std::string ReplicationSource::replid() const {
    std::lock_guard lock(mutex_);
    return replid_;
}

void ReplicationSource::renew_replid() {
    std::lock_guard lock(mutex_);
    replid_ = new_replication_id();
    departed_.clear();
}

bool ReplicationSource::can_continue(const std::string& replid, std::int64_t offset) {
    persist::Journal* journal = persistence_.journal();
    bool ok = false;
    if (journal != nullptr && offset >= 0 && replid == this->replid()) {
        const auto segments = journal->segment_files();
        const std::uint64_t at = static_cast<std::uint64_t>(offset);
        ok = !segments.empty() && segments.front().start <= at && at <= journal->appended();
    }
    // "?" asks for a full synchronization: not a failed partial one.
    if (replid != "?") (ok ? partial_ok_ : partial_err_).fetch_add(1, std::memory_order_relaxed);
    return ok;
}

void ReplicationSource::count_full_sync() {
    full_syncs_.fetch_add(1, std::memory_order_relaxed);
}

void ReplicationSource::add_feed(const std::shared_ptr<Connection>& feed) {
    {
        std::lock_guard lock(mutex_);
        feeds_.push_back(feed);
    }
    // Keep the segments it needs from now on, before any snapshot drops them.
    update_floor();
}

void ReplicationSource::remove_feed(const Connection* feed, std::uint64_t acked_offset) {
    std::lock_guard lock(mutex_);
    std::erase_if(feeds_, [feed](const std::weak_ptr<Connection>& weak) {
        const auto live = weak.lock();
        return !live || live.get() == feed;
    });
    departed_.push_back({acked_offset, store::now_ms()});
}

std::vector<std::shared_ptr<Connection>> ReplicationSource::live_feeds() {
    std::vector<std::shared_ptr<Connection>> out;
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
    for (const auto& feed : live_feeds()) feed->feed_wake();
}

std::int64_t ReplicationSource::acked_at_least(std::uint64_t target) {
    std::int64_t count = 0;
    for (const auto& feed : live_feeds()) {
        if (feed->feed_online() &&
            feed->client().replica_ack_offset.load(std::memory_order_relaxed) >= target) {
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
    const std::vector<std::shared_ptr<Connection>> feeds = live_feeds();
    // The oldest offset a replica may ask for: connected ones' acked (or
    // where their feed starts), and those that left recently; never more
    // than --repl-backlog-size behind.
    std::uint64_t floor = ~0ull;
    for (const auto& feed : feeds) floor = std::min(floor, feed->feed_floor());
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

void ReplicationSource::fill_info(core::ReplicationInfo& info) {
    const std::int64_t now = store::now_ms();
    for (const auto& feed : live_feeds()) {
        const command::ClientState& client = feed->client();
        core::ReplicaInfo replica;
        const std::string& address = client.address;
        const auto colon = address.find_last_of(':');
        replica.ip = colon == std::string::npos ? address : address.substr(0, colon);
        if (!replica.ip.empty() && replica.ip.front() == '[') {
            replica.ip = replica.ip.substr(1, replica.ip.size() - 2);
        }
        replica.port = client.replica_listening_port.load(std::memory_order_relaxed);
        replica.state = feed->feed_online() ? "online" : "wait_bgsave";
        replica.offset = client.replica_ack_offset.load(std::memory_order_relaxed);
        const std::int64_t last = client.replica_ack_ms.load(std::memory_order_relaxed);
        replica.lag_seconds = last == 0 ? 0 : (now - last) / 1000;
        info.replicas.push_back(std::move(replica));
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

// ---- ReplicaLink ----

namespace {

void append_bulk(std::string& out, std::string_view word) {
    out += "$" + std::to_string(word.size()) + "\r\n";
    out.append(word);
    out += "\r\n";
}

// A command in RESP.
template <class... Words>
std::string command(const Words&... words) {
    std::string out = "*" + std::to_string(sizeof...(words)) + "\r\n";
    (append_bulk(out, std::string_view(words)), ...);
    return out;
}

}  // namespace

// The file a replica receives a snapshot into; removed when done with.
class SyncFile {
public:
    explicit SyncFile(std::string path) : path_(std::move(path)) {
        fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd_ < 0) {
            throw std::runtime_error("cannot create " + path_ + ": " + std::strerror(errno));
        }
    }
    ~SyncFile() {
        close();
        ::unlink(path_.c_str());
    }
    SyncFile(const SyncFile&) = delete;
    SyncFile& operator=(const SyncFile&) = delete;
    void write(const char* data, std::size_t size) {
        while (size > 0) {
            const ssize_t n = ::write(fd_, data, size);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                throw std::runtime_error("cannot write " + path_ + ": " + std::strerror(errno));
            }
            data += n;
            size -= static_cast<std::size_t>(n);
            bytes_ += static_cast<std::uint64_t>(n);
        }
    }
    void close() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }
    const std::string& path() const { return path_; }
    std::uint64_t bytes() const { return bytes_; }

private:
    std::string path_;
    int fd_ = -1;
    std::uint64_t bytes_ = 0;
};

ReplicaLink::ReplicaLink(const core::Config& config, store::Keyspace& keyspace,
                         persist::Manager& persistence, core::ServerHooks& hooks, std::string host,
                         std::uint16_t port)
    : config_(config),
      keyspace_(keyspace),
      persistence_(persistence),
      hooks_(hooks),
      host_(std::move(host)),
      port_(port) {
    down_since_ms_ = store::now_ms();
}

ReplicaLink::~ReplicaLink() {
    stop();
}

void ReplicaLink::start() {
    hooks_.replication_flags.fetch_or(core::kReplicationReplica | core::kReplicationStale |
                                      core::kReplicationUnsynced);
    asio::post(io_, [this] { begin_session(); });
    thread_ = std::thread([this] { io_.run(); });
}

void ReplicaLink::stop() {
    if (!thread_.joinable()) return;
    stopping_.store(true);
    asio::post(io_, [this] {
        ++session_;
        error_code ignored;
        resolver_.cancel();
        socket_.close(ignored);
        watchdog_.cancel();
        ack_timer_.cancel();
        pause_.cancel();
        work_.reset();
    });
    thread_.join();
    hooks_.replication_flags.fetch_and(static_cast<std::uint8_t>(
        ~(core::kReplicationLoading | core::kReplicationStale | core::kReplicationUnsynced)));
}

void ReplicaLink::fill_info(core::ReplicationInfo& info) const {
    std::lock_guard lock(info_mutex_);
    const std::int64_t now = store::now_ms();
    info.replica = true;
    info.primary_host = host_;
    info.primary_port = port_;
    info.replid = replid_.empty() ? std::string(40, '0') : replid_;
    info.offset = offset_;
    info.read_offset = read_offset_;
    info.link_up = up_;
    info.sync_in_progress = syncing_;
    info.sync_received_bytes = sync_bytes_;
    info.last_io_seconds_ago = last_io_ms_ == 0 ? -1 : (now - last_io_ms_) / 1000;
    info.link_down_since_seconds = up_ ? -1 : (now - down_since_ms_) / 1000;
    info.last_error = last_error_;
}

std::uint64_t ReplicaLink::applied_offset() const {
    std::lock_guard lock(info_mutex_);
    return offset_;
}

void ReplicaLink::fail(const std::string& why) {
    if (stopping_.load()) return;
    spdlog::warn("replication: link to {}:{} failed: {}", host_, port_, why);
    ++session_;
    error_code ignored;
    socket_.close(ignored);
    watchdog_.cancel();
    ack_timer_.cancel();
    writes_.clear();
    writing_ = false;
    ack_pending_ = false;
    sync_file_.reset();
    {
        std::lock_guard lock(info_mutex_);
        if (up_) down_since_ms_ = store::now_ms();
        up_ = false;
        syncing_ = false;
        last_error_ = why;
    }
    hooks_.replication_flags.fetch_or(core::kReplicationStale);
    // Reconnect a second later, as Redis does.
    pause_.expires_after(std::chrono::seconds(1));
    pause_.async_wait([this](const error_code& error) {
        if (!error && !stopping_.load()) begin_session();
    });
}

void ReplicaLink::arm_watchdog() {
    watchdog_.expires_after(std::chrono::seconds(config_.repl_timeout_seconds));
    watchdog_.async_wait([this, session = session_](const error_code& error) {
        if (error || stale(session)) return;  // re-armed, or that session is over
        fail("nothing from the primary for " + std::to_string(config_.repl_timeout_seconds) +
             " s (--repl-timeout)");
    });
}

void ReplicaLink::write(std::string text, Step then) {
    writes_.emplace_back(std::make_shared<std::string>(std::move(text)), std::move(then));
    if (!writing_) write_next();
}

void ReplicaLink::write_next() {
    if (writes_.empty()) {
        writing_ = false;
        return;
    }
    writing_ = true;
    // The handler holds the bytes: a failed session clears writes_ while the
    // write may still be in flight.
    std::shared_ptr<std::string> text = writes_.front().first;
    asio::async_write(socket_, asio::buffer(*text),
                      [this, session = session_, text](const error_code& error, std::size_t) {
                          if (stale(session)) return;
                          if (error) return fail(error.message());
                          Step then = std::move(writes_.front().second);
                          writes_.pop_front();
                          write_next();
                          if (then) then();
                      });
}

void ReplicaLink::read_line(std::function<void(std::string)> then) {
    const auto end = input_.find("\r\n");
    if (end != std::string::npos) {
        std::string line = input_.substr(0, end);
        input_.erase(0, end + 2);
        then(std::move(line));
        return;
    }
    if (input_.size() > 64 * 1024) return fail("the primary sent a line too long");
    socket_.async_read_some(asio::buffer(chunk_),
                            [this, session = session_, then = std::move(then)](
                                const error_code& error, std::size_t n) mutable {
                                if (stale(session)) return;
                                if (error) return fail(error.message());
                                arm_watchdog();
                                input_.append(chunk_.data(), n);
                                read_line(std::move(then));
                            });
}

void ReplicaLink::begin_session() {
    if (stopping_.load()) return;
    ++session_;
    input_.clear();
    socket_ = asio::ip::tcp::socket(io_);
    arm_watchdog();
    resolver_.async_resolve(
        host_, std::to_string(port_),
        [this, session = session_](const error_code& error,
                                   const asio::ip::tcp::resolver::results_type& endpoints) {
            if (stale(session)) return;
            if (error) return fail("cannot resolve " + host_ + ": " + error.message());
            asio::async_connect(
                socket_, endpoints,
                [this, session](const error_code& connect_error, const asio::ip::tcp::endpoint&) {
                    if (stale(session)) return;
                    if (connect_error) return fail(connect_error.message());
                    on_connected();
                });
        });
}

void ReplicaLink::on_connected() {
    error_code ignored;
    socket_.set_option(asio::ip::tcp::no_delay(true), ignored);
    const auto replconf = [this] {
        write(command("REPLCONF", "listening-port", std::to_string(config_.port)));
        read_line([this](std::string reply) {
            if (reply != "+OK") return fail("the primary refused REPLCONF: " + reply);
            send_psync();
        });
    };
    if (config_.masterauth.empty()) return replconf();
    write(config_.masteruser.empty() ? command("AUTH", config_.masterauth)
                                     : command("AUTH", config_.masteruser, config_.masterauth));
    read_line([this, replconf](std::string reply) {
        if (reply != "+OK") return fail("AUTH refused by the primary: " + reply);
        replconf();
    });
}

void ReplicaLink::send_psync() {
    std::string replid;
    std::uint64_t offset;
    {
        std::lock_guard lock(info_mutex_);
        replid = applier_ ? replid_ : std::string();
        offset = offset_;
    }
    write(replid.empty() ? command("PSYNC", "?", "-1")
                         : command("PSYNC", replid, std::to_string(offset)));
    read_line([this](std::string reply) { on_psync_reply(reply); });
}

void ReplicaLink::on_psync_reply(const std::string& reply) {
    if (reply.rfind("+CONTINUE", 0) == 0) {
        spdlog::info("replication: resuming from {}:{} at offset {}", host_, port_,
                     applied_offset());
        return go_up();
    }
    if (reply.rfind("+FULLRESYNC ", 0) != 0) return fail("the primary refused PSYNC: " + reply);
    const auto space = reply.find(' ', 12);
    const std::string offset = space == std::string::npos ? "" : reply.substr(space + 1);
    if (space == std::string::npos || offset.empty() || offset.size() > 20 ||
        !std::all_of(offset.begin(), offset.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return fail("bad reply: " + reply);
    }
    new_replid_ = reply.substr(12, space - 12);
    new_offset_ = std::stoull(offset);
    {
        std::lock_guard lock(info_mutex_);
        syncing_ = true;
        sync_bytes_ = 0;
    }
    read_line([this](std::string header) {
        if (header.size() != 5 + 40 || header.rfind("$EOF:", 0) != 0) {
            return fail("bad snapshot header from the primary: " + header);
        }
        mark_ = header.substr(5);
        try {
            sync_file_ = std::make_unique<SyncFile>(config_.dir + "/replica-sync-" +
                                                    std::to_string(::getpid()) + ".tmp");
        } catch (const std::exception& e) {
            return fail(e.what());
        }
        receive_snapshot();
    });
}

// The snapshot arrives as "$EOF:<40-byte mark>\r\n", its bytes, the mark
// (Redis's diskless form); records may follow the mark in the same read. It
// goes to a file in --dir, then replaces the data (load_received).
void ReplicaLink::receive_snapshot() {
    try {
        const auto at = input_.find(mark_);
        if (at != std::string::npos) {
            sync_file_->write(input_.data(), at);
            input_.erase(0, at + mark_.size());
            sync_file_->close();
            load_received(sync_file_->path(), sync_file_->bytes());
            sync_file_.reset();
            arm_watchdog();  // the load took nothing from the socket
            {
                std::lock_guard lock(info_mutex_);
                replid_ = new_replid_;
                offset_ = read_offset_ = new_offset_;
                syncing_ = false;
            }
            spdlog::info("replication: synchronized with {}:{} at offset {}", host_, port_,
                         new_offset_);
            return go_up();
        }
        // Keep what could be the start of the mark.
        if (input_.size() > mark_.size()) {
            const std::size_t safe = input_.size() - mark_.size();
            sync_file_->write(input_.data(), safe);
            input_.erase(0, safe);
        }
    } catch (const std::exception& e) {
        return fail(e.what());
    }
    {
        std::lock_guard lock(info_mutex_);
        sync_bytes_ = sync_file_->bytes();
    }
    socket_.async_read_some(asio::buffer(chunk_),
                            [this, session = session_](const error_code& error, std::size_t n) {
                                if (stale(session)) return;
                                if (error) return fail(error.message());
                                arm_watchdog();
                                input_.append(chunk_.data(), n);
                                receive_snapshot();
                            });
}

void ReplicaLink::load_received(const std::string& path, std::uint64_t bytes) {
    spdlog::info("replication: received the primary's snapshot ({} bytes); loading it", bytes);
    hooks_.replication_flags.fetch_or(core::kReplicationLoading);
    persist::LoadStats stats;
    std::string error;
    const bool loaded = persistence_.replace_dataset(
        [&](std::string& load_error) {
            return persist::load_snapshot(path, keyspace_, stats, load_error);
        },
        error);
    hooks_.replication_flags.fetch_and(static_cast<std::uint8_t>(~core::kReplicationLoading));
    if (!loaded) throw std::runtime_error("cannot load the primary's snapshot: " + error);
    spdlog::info("replication: loaded {} filters from the primary in {:.3f} s", stats.keys,
                 stats.seconds);
    applier_ = std::make_unique<persist::StreamApplier>(keyspace_, persistence_.journal());
}

void ReplicaLink::go_up() {
    {
        std::lock_guard lock(info_mutex_);
        up_ = true;
        last_error_.clear();
        last_io_ms_ = store::now_ms();
    }
    hooks_.replication_flags.fetch_and(
        static_cast<std::uint8_t>(~(core::kReplicationStale | core::kReplicationUnsynced)));
    acked_ = ~0ull;  // acknowledge where we start
    acknowledge();
    schedule_ack();
    try {
        apply_buffer();
    } catch (const std::exception& e) {
        return fail(e.what());
    }
    read_stream();
}

void ReplicaLink::read_stream() {
    socket_.async_read_some(asio::buffer(chunk_),
                            [this, session = session_](const error_code& error, std::size_t n) {
                                if (stale(session)) return;
                                if (error) return fail(error.message());
                                on_stream_read(n);
                            });
}

void ReplicaLink::on_stream_read(std::size_t n) {
    arm_watchdog();
    input_.append(chunk_.data(), n);
    {
        std::lock_guard lock(info_mutex_);
        read_offset_ += n;
        last_io_ms_ = store::now_ms();
    }
    try {
        apply_buffer();
    } catch (const std::exception& e) {
        return fail(e.what());
    }
    // The link's buffers count in used_memory, as a client's query buffer.
    buffer_charge_.set(input_.capacity() + chunk_.capacity());
    read_stream();
}

void ReplicaLink::apply_buffer() {
    std::size_t consumed = 0;
    std::string error;
    // The replica's journal may have been replaced by a full copy.
    applier_->set_log(persistence_.journal());
    const bool ok = applier_->apply(input_, consumed, error);
    input_.erase(0, consumed);
    {
        std::lock_guard lock(info_mutex_);
        offset_ += consumed;
    }
    if (!ok) {
        // Our copy may now differ from the primary's: start over from a full one.
        applier_.reset();
        throw std::runtime_error(error);
    }
    if (consumed != 0) acknowledge();
}

// REPLCONF ACK: as soon as records were applied (one at a time; an offset
// that moved during a write is sent right after it), so WAIT on the primary
// returns promptly, and once a second so it sees the lag.
void ReplicaLink::acknowledge() {
    if (ack_pending_) return;
    const std::uint64_t offset = applied_offset();
    if (offset == acked_) return;
    ack_pending_ = true;
    write(command("REPLCONF", "ACK", std::to_string(offset)), [this, offset] {
        ack_pending_ = false;
        acked_ = offset;
        acknowledge();
    });
}

void ReplicaLink::schedule_ack() {
    ack_timer_.expires_after(std::chrono::seconds(1));
    ack_timer_.async_wait([this, session = session_](const error_code& error) {
        if (error || stale(session)) return;
        acked_ = ~0ull;  // once a second even when nothing moved (lag)
        acknowledge();
        schedule_ack();
    });
}

}  // namespace bloomery::net
