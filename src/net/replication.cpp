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

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>

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
    asio::co_spawn(io_, run(), asio::detached);
    thread_ = std::thread([this] { io_.run(); });
}

void ReplicaLink::stop() {
    if (!thread_.joinable()) return;
    stopping_.store(true);
    asio::post(io_, [this] {
        error_code ignored;
        socket_.close(ignored);
        watchdog_.cancel();
        ack_timer_.cancel();
    });
    thread_.join();
    hooks_.replication_flags.fetch_and(static_cast<std::uint8_t>(
        ~(core::kReplicationLoading | core::kReplicationStale | core::kReplicationUnsynced)));
}

void ReplicaLink::set_error(const std::string& error) {
    std::lock_guard lock(info_mutex_);
    if (up_) down_since_ms_ = store::now_ms();
    up_ = false;
    syncing_ = false;
    last_error_ = error;
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

void ReplicaLink::arm_watchdog() {
    watchdog_.expires_after(std::chrono::seconds(config_.repl_timeout_seconds));
    watchdog_.async_wait([this](const error_code& error) {
        if (error) return;  // re-armed or stopped
        spdlog::warn("replication: no data from the primary {}:{} for {} s; reconnecting", host_,
                     port_, config_.repl_timeout_seconds);
        error_code ignored;
        socket_.close(ignored);
    });
}

asio::awaitable<std::string> ReplicaLink::read_line() {
    for (;;) {
        const auto end = input_.find("\r\n");
        if (end != std::string::npos) {
            std::string line = input_.substr(0, end);
            input_.erase(0, end + 2);
            co_return line;
        }
        if (input_.size() > 64 * 1024) throw std::runtime_error("the primary sent a line too long");
        // (A vector: GCC 12 cannot keep a C array in a coroutine frame.)
        std::vector<char> chunk(4096);
        const std::size_t n =
            co_await socket_.async_read_some(asio::buffer(chunk), asio::use_awaitable);
        arm_watchdog();
        input_.append(chunk.data(), n);
    }
}

// Sends `text`. Callers pass a named string: GCC 12 destroys a temporary in
// a co_await's operand twice (a double free, found with ASan).
asio::awaitable<void> ReplicaLink::write(const std::string& text) {
    co_await asio::async_write(socket_, asio::buffer(text), asio::use_awaitable);
}

namespace {

void append_bulk(std::string& out, std::string_view word) {
    out += "$" + std::to_string(word.size()) + "\r\n";
    out.append(word);
    out += "\r\n";
}

// A command in RESP. Variadic, not an initializer_list: GCC 12 cannot keep
// one in a coroutine frame ("array used as initializer").
template <class... Words>
std::string command(const Words&... words) {
    std::string out = "*" + std::to_string(sizeof...(words)) + "\r\n";
    (append_bulk(out, std::string_view(words)), ...);
    return out;
}

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
    std::uint64_t bytes() const { return bytes_; }

private:
    std::string path_;
    int fd_ = -1;
    std::uint64_t bytes_ = 0;
};

}  // namespace

// The snapshot arrives as "$EOF:<40-byte mark>\r\n", its bytes, the mark
// (Redis's diskless form); records may follow the mark in the same read. It
// goes to a file in --dir, then replaces the data (load_received). The file
// work is in plain functions: GCC 12 miscompiles lambdas and aggregates of
// locals inside coroutines.
asio::awaitable<void> ReplicaLink::receive_snapshot(const std::string& mark) {
    const std::string path = config_.dir + "/replica-sync-" + std::to_string(::getpid()) + ".tmp";
    SyncFile file(path);
    std::vector<char> chunk(256 * 1024);
    for (;;) {
        const auto at = input_.find(mark);
        if (at != std::string::npos) {
            file.write(input_.data(), at);
            input_.erase(0, at + mark.size());
            break;
        }
        // Keep what could be the start of the mark.
        if (input_.size() > mark.size()) {
            const std::size_t safe = input_.size() - mark.size();
            file.write(input_.data(), safe);
            input_.erase(0, safe);
        }
        {
            std::lock_guard lock(info_mutex_);
            sync_bytes_ = file.bytes();
        }
        const std::size_t n =
            co_await socket_.async_read_some(asio::buffer(chunk), asio::use_awaitable);
        arm_watchdog();
        input_.append(chunk.data(), n);
    }
    file.close();
    load_received(path, file.bytes());
    arm_watchdog();  // the load took no bytes from the socket
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

void ReplicaLink::apply_buffer() {
    std::size_t consumed = 0;
    std::string error;
    // The replica's journal may have been replaced by a full sync.
    applier_->set_log(persistence_.journal());
    const bool ok = applier_->apply(input_, consumed, error);
    input_.erase(0, consumed);
    {
        std::lock_guard lock(info_mutex_);
        offset_ += consumed;
    }
    if (!ok) {
        // Our copy may now differ from the primary's: start over from a full one.
        std::lock_guard lock(info_mutex_);
        replid_.clear();
        throw std::runtime_error(error);
    }
    if (consumed != 0) ack_timer_.cancel();  // acknowledge now
}

asio::awaitable<void> ReplicaLink::send_acks() {
    // One writer for acknowledgements: as soon as records were applied
    // (apply_buffer cancels the wait; an offset that moved during a write is
    // sent right after it), else once a second so the primary sees the lag.
    for (;;) {
        std::uint64_t offset = applied_offset();
        if (offset == acked_) {
            ack_timer_.expires_after(std::chrono::seconds(1));
            error_code error;
            co_await ack_timer_.async_wait(asio::redirect_error(asio::use_awaitable, error));
            if (stopping_.load() || !socket_.is_open()) co_return;
            offset = applied_offset();
        }
        const std::string ack = command("REPLCONF", "ACK", std::to_string(offset));
        error_code write_error;
        co_await asio::async_write(socket_, asio::buffer(ack),
                                   asio::redirect_error(asio::use_awaitable, write_error));
        if (write_error) co_return;
        acked_ = offset;
    }
}

std::uint64_t ReplicaLink::applied_offset() const {
    std::lock_guard lock(info_mutex_);
    return offset_;
}

asio::awaitable<void> ReplicaLink::session() {
    input_.clear();
    asio::ip::tcp::resolver resolver(io_);
    arm_watchdog();
    const std::string service = std::to_string(port_);
    const auto endpoints = co_await resolver.async_resolve(host_, service, asio::use_awaitable);
    co_await asio::async_connect(socket_, endpoints, asio::use_awaitable);
    socket_.set_option(asio::ip::tcp::no_delay(true));
    std::string request;
    if (!config_.masterauth.empty()) {
        request = config_.masteruser.empty()
                      ? command("AUTH", config_.masterauth)
                      : command("AUTH", config_.masteruser, config_.masterauth);
        co_await write(request);
        const std::string reply = co_await read_line();
        if (reply != "+OK") throw std::runtime_error("AUTH refused by the primary: " + reply);
    }
    request = command("REPLCONF", "listening-port", std::to_string(config_.port));
    co_await write(request);
    std::string reply = co_await read_line();
    if (reply != "+OK") throw std::runtime_error("the primary refused REPLCONF: " + reply);
    std::string replid;
    std::uint64_t offset;
    {
        std::lock_guard lock(info_mutex_);
        replid = applier_ ? replid_ : std::string();
        offset = offset_;
    }
    request = replid.empty() ? command("PSYNC", "?", "-1")
                             : command("PSYNC", replid, std::to_string(offset));
    co_await write(request);
    reply = co_await read_line();
    if (reply.rfind("+FULLRESYNC ", 0) == 0) {
        const auto space = reply.find(' ', 12);
        if (space == std::string::npos) throw std::runtime_error("bad reply: " + reply);
        const std::string new_replid = reply.substr(12, space - 12);
        const std::uint64_t new_offset = std::stoull(reply.substr(space + 1));
        {
            std::lock_guard lock(info_mutex_);
            syncing_ = true;
            sync_bytes_ = 0;
        }
        const std::string header = co_await read_line();
        if (header.size() != 5 + 40 || header.rfind("$EOF:", 0) != 0) {
            throw std::runtime_error("bad snapshot header from the primary: " + header);
        }
        const std::string mark = header.substr(5);
        co_await receive_snapshot(mark);
        std::lock_guard lock(info_mutex_);
        replid_ = new_replid;
        offset_ = read_offset_ = new_offset;
        syncing_ = false;
        spdlog::info("replication: synchronized with {}:{} at offset {}", host_, port_, new_offset);
    } else if (reply.rfind("+CONTINUE", 0) == 0) {
        spdlog::info("replication: resuming from {}:{} at offset {}", host_, port_, offset);
    } else {
        throw std::runtime_error("the primary refused PSYNC: " + reply);
    }
    {
        std::lock_guard lock(info_mutex_);
        up_ = true;
        last_error_.clear();
        last_io_ms_ = store::now_ms();
    }
    hooks_.replication_flags.fetch_and(
        static_cast<std::uint8_t>(~(core::kReplicationStale | core::kReplicationUnsynced)));
    acked_ = ~0ull;  // acknowledge where we start
    asio::co_spawn(io_, send_acks(), asio::detached);
    apply_buffer();
    std::vector<char> chunk(256 * 1024);
    for (;;) {
        const std::size_t n =
            co_await socket_.async_read_some(asio::buffer(chunk), asio::use_awaitable);
        arm_watchdog();
        input_.append(chunk.data(), n);
        {
            std::lock_guard lock(info_mutex_);
            read_offset_ += n;
            last_io_ms_ = store::now_ms();
        }
        apply_buffer();
    }
}

asio::awaitable<void> ReplicaLink::run() {
    hooks_.replication_flags.fetch_or(core::kReplicationReplica | core::kReplicationStale |
                                      core::kReplicationUnsynced);
    while (!stopping_.load()) {
        try {
            co_await session();
        } catch (const std::exception& e) {
            if (!stopping_.load()) {
                spdlog::warn("replication: link to {}:{} failed: {}", host_, port_, e.what());
                set_error(e.what());
            }
        }
        error_code ignored;
        socket_.close(ignored);
        ack_timer_.cancel();
        watchdog_.cancel();
        {
            std::lock_guard lock(info_mutex_);
            if (up_) down_since_ms_ = store::now_ms();
            up_ = false;
            syncing_ = false;
        }
        hooks_.replication_flags.fetch_or(core::kReplicationStale);
        if (stopping_.load()) break;
        // Back off before reconnecting (Redis retries every second).
        asio::steady_timer pause(io_, std::chrono::seconds(1));
        error_code wait_error;
        co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, wait_error));
        socket_ = asio::ip::tcp::socket(io_);
    }
}

}  // namespace bloomery::net
