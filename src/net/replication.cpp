#include "bloomery/net/replication.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <system_error>

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

std::size_t ReplicationSource::replica_count() {
    return live_feeds().size();
}

std::size_t ReplicationSource::replicas_behind(std::uint64_t offset) {
    std::size_t behind = 0;
    for (const auto& feed : live_feeds()) {
        if (!feed->feed_online() ||
            feed->client().replica_ack_offset.load(std::memory_order_relaxed) < offset) {
            ++behind;
        }
    }
    return behind;
}

void ReplicationSource::fill_info(command::ReplicationInfo& info) {
    const std::int64_t now = store::now_ms();
    for (const auto& feed : live_feeds()) {
        const command::ClientState& client = feed->client();
        command::ReplicaInfo replica;
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

// ---- What a replica receives ----

std::string sync_file_path(const std::string& dir) {
    return dir + "/replica-sync-" + std::to_string(::getpid()) + ".tmp";
}

std::size_t remove_stale_sync_files(const std::string& dir, const std::string& keep) {
    namespace fs = std::filesystem;
    std::size_t removed = 0;
    std::error_code error;
    for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
        const std::string name = it->path().filename().string();
        if (!name.starts_with("replica-sync-") || !name.ends_with(".tmp")) continue;
        if (!keep.empty() && name == fs::path(keep).filename().string()) continue;
        std::error_code size_error;
        const std::uintmax_t bytes = it->file_size(size_error);
        std::error_code remove_error;
        if (fs::remove(it->path(), remove_error)) {
            ++removed;
            spdlog::info(
                "replication: removed {} ({} bytes), left by a replica stopped during a full "
                "synchronization",
                it->path().string(), size_error ? 0 : bytes);
        } else if (remove_error) {
            spdlog::warn("replication: cannot remove {}: {}", it->path().string(),
                         remove_error.message());
        }
    }
    return removed;
}

namespace {

// A primary's text as a reason in INFO and the log: printable ASCII, cut to
// a length worth reading.
std::string printable(std::string_view text) {
    constexpr std::size_t kShown = 128;
    std::string out;
    for (const char c : text.substr(0, kShown)) {
        const auto byte = static_cast<unsigned char>(c);
        out.push_back(byte >= 0x20 && byte < 0x7f ? c : '?');
    }
    if (text.size() > kShown) out += "...";
    return out;
}

// Replication ids and snapshot marks: 40 lowercase hex digits, as this
// server (and Redis) makes them.
bool is_hex_id(std::string_view text) {
    return text.size() == 40 && std::all_of(text.begin(), text.end(), [](char c) {
               return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
           });
}

// A stream offset: decimal digits only, at most INT64_MAX (the replica
// sends it back in PSYNC, which the primary reads as a signed integer).
bool parse_offset(std::string_view text, std::uint64_t& offset) {
    if (text.empty() || text.size() > 19 ||
        !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return false;
    }
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), offset);
    return error == std::errc() && end == text.data() + text.size() &&
           offset <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
}

}  // namespace

void PrimaryStreamDecoder::start(bool auth, bool resume) {
    phase_ = auth ? Phase::auth : Phase::replconf;
    resume_ = resume;
    input_.clear();
    handed_ = seen_ = 0;
    data_ = {};
    mark_.clear();
    replid_.clear();
    offset_ = 0;
    error_.clear();
}

void PrimaryStreamDecoder::append(std::string_view bytes) {
    if (phase_ == Phase::failed) return;
    // What the last snapshot_data handed out is gone once more comes.
    input_.erase(0, handed_);
    handed_ = 0;
    data_ = {};
    input_.append(bytes);
}

void PrimaryStreamDecoder::consume(std::size_t bytes) {
    bytes = std::min(bytes, seen_);
    input_.erase(0, bytes);
    seen_ -= bytes;
    data_ = {};
}

PrimaryStreamDecoder::Event PrimaryStreamDecoder::fail(std::string why) {
    phase_ = Phase::failed;
    error_ = std::move(why);
    input_.clear();
    handed_ = seen_ = 0;
    data_ = {};
    return Event::failed;
}

bool PrimaryStreamDecoder::take_line(std::string& line) {
    const auto end = input_.find("\r\n");
    if (end == std::string::npos) {
        if (input_.size() > kMaxLineBytes) {
            fail("the primary sent a line longer than " + std::to_string(kMaxLineBytes) + " bytes");
        }
        return false;
    }
    if (end > kMaxLineBytes) {
        fail("the primary sent a line longer than " + std::to_string(kMaxLineBytes) + " bytes");
        return false;
    }
    line.assign(input_, 0, end);
    input_.erase(0, end + 2);
    return true;
}

PrimaryStreamDecoder::Event PrimaryStreamDecoder::next() {
    input_.erase(0, handed_);
    handed_ = 0;
    data_ = {};
    for (;;) {
        switch (phase_) {
            case Phase::failed:
                return Event::failed;
            case Phase::snapshot:
                return snapshot_bytes();
            case Phase::stream:
                if (input_.size() == seen_) return Event::need_more;
                seen_ = input_.size();
                data_ = input_;
                return Event::stream;
            default: {
                std::string line;
                if (!take_line(line))
                    return phase_ == Phase::failed ? Event::failed : Event::need_more;
                const Event event = on_line(line);
                if (event != Event::need_more) return event;
                // The snapshot's header: its bytes may follow in this read.
            }
        }
    }
}

PrimaryStreamDecoder::Event PrimaryStreamDecoder::on_line(const std::string& line) {
    switch (phase_) {
        case Phase::auth:
            if (line != "+OK") return fail("AUTH refused by the primary: " + printable(line));
            phase_ = Phase::replconf;
            return Event::auth_ok;
        case Phase::replconf:
            if (line != "+OK") return fail("the primary refused REPLCONF: " + printable(line));
            phase_ = Phase::psync;
            return Event::replconf_ok;
        case Phase::psync:
            return on_psync_answer(line);
        case Phase::snapshot_header: {
            constexpr std::string_view kEof = "$EOF:";
            if (line.starts_with('-')) {
                return fail("the primary could not send its snapshot: " + printable(line));
            }
            const std::string_view mark =
                std::string_view(line).substr(line.starts_with(kEof) ? kEof.size() : line.size());
            if (!line.starts_with(kEof) || !is_hex_id(mark)) {
                return fail(
                    "bad snapshot header from the primary (expected $EOF:<40 hex "
                    "digits>): " +
                    printable(line));
            }
            mark_.assign(mark);
            phase_ = Phase::snapshot;
            return Event::need_more;  // next() goes on with the snapshot's bytes
        }
        default:
            return fail("internal: a line in the wrong phase");
    }
}

PrimaryStreamDecoder::Event PrimaryStreamDecoder::on_psync_answer(const std::string& line) {
    constexpr std::string_view kContinue = "+CONTINUE";
    constexpr std::string_view kFull = "+FULLRESYNC ";
    if (line == kContinue || line.starts_with(std::string(kContinue) + " ")) {
        if (!resume_) {
            return fail("the primary answered +CONTINUE to PSYNC ? -1 (a request for a full copy)");
        }
        // Redis sends its id, which may be new (a promoted replica that kept
        // the history); an answer without one keeps the id asked for.
        if (line.size() > kContinue.size()) {
            const std::string_view id = std::string_view(line).substr(kContinue.size() + 1);
            if (!is_hex_id(id)) {
                return fail("bad replication id in the primary's +CONTINUE: " + printable(line));
            }
            replid_.assign(id);
        }
        phase_ = Phase::stream;
        return Event::resume;
    }
    if (line.starts_with(kFull)) {
        const std::string_view rest = std::string_view(line).substr(kFull.size());
        const auto space = rest.find(' ');
        const std::string_view id = rest.substr(0, space);
        if (space == std::string_view::npos || !is_hex_id(id)) {
            return fail("bad replication id in the primary's +FULLRESYNC: " + printable(line));
        }
        if (!parse_offset(rest.substr(space + 1), offset_)) {
            return fail("bad offset in the primary's +FULLRESYNC (digits, at most 2^63-1): " +
                        printable(line));
        }
        replid_.assign(id);
        phase_ = Phase::snapshot_header;
        return Event::full_sync;
    }
    if (line.starts_with('-')) return fail("the primary refused PSYNC: " + printable(line));
    return fail("bad answer to PSYNC from the primary: " + printable(line));
}

// The snapshot ends with the mark; a read may hold its end and the stream's
// first records, or a part of the mark: the last mark-1 bytes wait for more.
PrimaryStreamDecoder::Event PrimaryStreamDecoder::snapshot_bytes() {
    const auto at = input_.find(mark_);
    if (at == 0) {
        input_.erase(0, mark_.size());
        phase_ = Phase::stream;
        return Event::snapshot_end;
    }
    const std::size_t hold = mark_.size() - 1;
    const std::size_t safe = at != std::string::npos ? at
                             : input_.size() > hold  ? input_.size() - hold
                                                     : 0;
    if (safe == 0) return Event::need_more;
    handed_ = safe;
    data_ = std::string_view(input_).substr(0, safe);
    return Event::snapshot_data;
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
                         persist::Manager& persistence, command::ReplicaGate& gate,
                         std::string host, std::uint16_t port, std::function<void()> before_start)
    : config_(config),
      keyspace_(keyspace),
      persistence_(persistence),
      gate_(gate),
      host_(std::move(host)),
      port_(port),
      before_start_(std::move(before_start)) {
    down_since_ms_ = store::now_ms();
}

ReplicaLink::~ReplicaLink() {
    stop();
}

void ReplicaLink::start() {
    gate_.replication_flags.fetch_or(command::kReplicationReplica | command::kReplicationStale |
                                     command::kReplicationUnsynced);
    asio::post(io_, [this] { begin_session(); });
    thread_ = std::thread([this] {
        if (before_start_) {
            before_start_();
            before_start_ = nullptr;  // what it held (the link replaced) goes now
        }
        io_.run();
    });
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
}

void ReplicaLink::retire() {
    std::lock_guard lock(info_mutex_);
    retired_ = true;
}

void ReplicaLink::fill_info(command::ReplicationInfo& info) const {
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

void ReplicaLink::fail(std::string why) {
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
    decoder_.start(false, false);  // gives back what it held
    buffer_charge_.set(0);
    {
        std::lock_guard lock(info_mutex_);
        if (up_) down_since_ms_ = store::now_ms();
        up_ = false;
        syncing_ = false;
        last_error_ = why;
    }
    gate_.replication_flags.fetch_or(command::kReplicationStale);
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

void ReplicaLink::begin_session() {
    if (stopping_.load()) return;
    ++session_;
    bool resume = false;
    {
        std::lock_guard lock(info_mutex_);
        // Only a replica holding a copy of this primary's history can resume.
        resume = applier_ != nullptr && !replid_.empty();
    }
    decoder_.start(!config_.masterauth.empty(), resume);
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
    // Each command waits for the answer to the one before (the decoder says
    // which came): after a refused AUTH, nothing else is sent.
    if (config_.masterauth.empty()) {
        write(command("REPLCONF", "listening-port", std::to_string(config_.port)));
    } else {
        write(config_.masteruser.empty() ? command("AUTH", config_.masterauth)
                                         : command("AUTH", config_.masteruser, config_.masterauth));
    }
    read_more();
}

void ReplicaLink::send_psync() {
    std::string replid;
    std::uint64_t offset;
    {
        std::lock_guard lock(info_mutex_);
        replid = replid_;
        offset = offset_;
    }
    write(decoder_.resuming() ? command("PSYNC", replid, std::to_string(offset))
                              : command("PSYNC", "?", "-1"));
}

void ReplicaLink::read_more() {
    socket_.async_read_some(asio::buffer(chunk_),
                            [this, session = session_](const error_code& error, std::size_t n) {
                                if (stale(session)) return;
                                if (error) return fail(error.message());
                                arm_watchdog();
                                decoder_.append(std::string_view(chunk_.data(), n));
                                {
                                    std::lock_guard lock(info_mutex_);
                                    last_io_ms_ = store::now_ms();
                                }
                                on_input();
                            });
}

void ReplicaLink::on_input() {
    const std::uint64_t session = session_;
    try {
        for (;;) {
            switch (decoder_.next()) {
                case Event::need_more:
                    // The link's buffers count in used_memory, as a client's
                    // query buffer.
                    buffer_charge_.set(decoder_.capacity() + chunk_.capacity());
                    return read_more();
                case Event::auth_ok:
                    write(command("REPLCONF", "listening-port", std::to_string(config_.port)));
                    break;
                case Event::replconf_ok:
                    send_psync();
                    break;
                case Event::resume:
                    on_resume();
                    break;
                case Event::full_sync:
                    begin_full_sync();
                    break;
                case Event::snapshot_data: {
                    const std::string_view data = decoder_.data();
                    sync_file_->write(data.data(), data.size());
                    std::lock_guard lock(info_mutex_);
                    sync_bytes_ = sync_file_->bytes();
                    break;
                }
                case Event::snapshot_end:
                    finish_full_sync();
                    break;
                case Event::stream:
                    apply_stream();
                    break;
                case Event::failed:
                    return fail(decoder_.error());
            }
            if (stale(session)) return;
        }
    } catch (const std::exception& e) {
        fail(e.what());
    }
}

void ReplicaLink::on_resume() {
    spdlog::info("replication: resuming from {}:{} at offset {}", host_, port_, applied_offset());
    if (!decoder_.replid().empty()) {
        std::lock_guard lock(info_mutex_);
        replid_ = decoder_.replid();
    }
    go_up();
}

// The snapshot arrives as "$EOF:<40-byte mark>\r\n", its bytes, the mark
// (Redis's diskless form). It goes to a file in --dir, then replaces the
// data (load_received).
void ReplicaLink::begin_full_sync() {
    {
        std::lock_guard lock(info_mutex_);
        syncing_ = true;
        sync_bytes_ = 0;
    }
    const std::string path = sync_file_path(config_.dir);
    remove_stale_sync_files(config_.dir, path);
    sync_file_ = std::make_unique<SyncFile>(path);
}

void ReplicaLink::finish_full_sync() {
    sync_file_->close();
    load_received(sync_file_->path(), sync_file_->bytes());
    sync_file_.reset();
    arm_watchdog();  // the load took nothing from the socket
    {
        std::lock_guard lock(info_mutex_);
        replid_ = decoder_.replid();
        offset_ = read_offset_ = decoder_.offset();
        syncing_ = false;
    }
    spdlog::info("replication: synchronized with {}:{} at offset {}", host_, port_,
                 decoder_.offset());
    go_up();
}

void ReplicaLink::load_received(const std::string& path, std::uint64_t bytes) {
    spdlog::info("replication: received the primary's snapshot ({} bytes); loading it", bytes);
    // A failed load leaves whatever it read: no stream may be applied to it.
    applier_.reset();
    gate_.replication_flags.fetch_or(command::kReplicationLoading);
    persist::LoadStats stats;
    std::string error;
    const bool loaded = persistence_.replace_dataset(
        [&](std::string& load_error) {
            return persist::load_snapshot(path, keyspace_, stats, load_error);
        },
        error);
    gate_.replication_flags.fetch_and(static_cast<std::uint8_t>(~command::kReplicationLoading));
    if (!loaded) {
        // Part of a copy is no copy: answer -MASTERDOWN until the next one.
        gate_.replication_flags.fetch_or(command::kReplicationUnsynced);
        throw std::runtime_error("cannot load the primary's snapshot: " + error);
    }
    spdlog::info("replication: loaded {} filters from the primary in {:.3f} s", stats.keys,
                 stats.seconds);
    applier_ = std::make_unique<persist::StreamApplier>(keyspace_);
}

void ReplicaLink::go_up() {
    {
        std::lock_guard lock(info_mutex_);
        // A link being replaced has no say on the flags: the data it holds
        // is not the new primary's (retire()).
        if (retired_) return;
        up_ = true;
        last_error_.clear();
        last_io_ms_ = store::now_ms();
        gate_.replication_flags.fetch_and(static_cast<std::uint8_t>(
            ~(command::kReplicationStale | command::kReplicationUnsynced)));
    }
    acked_ = ~0ull;  // acknowledge where we start
    acknowledge();
    schedule_ack();
}

void ReplicaLink::apply_stream() {
    // The decoder resumes only a replica that holds a copy (begin_session).
    if (!applier_) throw std::runtime_error("no copy of the primary to apply its stream to");
    const std::string_view data = decoder_.data();
    std::size_t consumed = 0;
    std::string error;
    const bool ok = applier_->apply(data, consumed, error);
    decoder_.consume(consumed);
    {
        std::lock_guard lock(info_mutex_);
        offset_ += consumed;
        read_offset_ = offset_ + decoder_.buffered();
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
