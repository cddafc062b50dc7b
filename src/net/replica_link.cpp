// A replica's link to its primary: connects, authenticates, asks for the
// stream (PSYNC), loads a full copy or resumes, applies records and
// acknowledges them; reconnects until stopped.

#include "bloomery/net/replication.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "bloomery/core/file_io.hpp"
#include "bloomery/core/memory.hpp"
#include "bloomery/persist/snapshot.hpp"
#include "bloomery/resp/writer.hpp"
#include "link_stream.hpp"

namespace bloomery::net {

namespace asio = boost::asio;
using boost::system::error_code;

// ---- ReplicaLink ----

namespace {

// A command in RESP.
template <class... Words>
std::string command(const Words&... words) {
    return resp::encode_command({std::string_view(words)...});
}

// The largest snapshot this replica takes from its primary. Once loaded,
// every filter and key the file describes is held in memory: the file stores
// each bit array's non-zero words (a run of them costs 16 bytes and leaves
// out at least 4 zero words before the next) and little beside it (a
// 37-byte header per layer, about 60 bytes and the name per key), all of
// which the loaded data set holds too. A larger file could not be held within --maxmemory or,
// without one, within the memory the process may use (its container's limit, else the machine's),
// so receiving more of it would only fill the disk: a primary that sent an endless snapshot once
// made a replica write until it was stopped (tests/bench/README.md).
std::uint64_t largest_snapshot(const core::Config& config) {
    return config.maxmemory != 0 ? config.maxmemory : core::memory_available();
}

}  // namespace

// The file a replica receives a snapshot into, at most `limit` bytes;
// removed when done with.
class SyncFile {
public:
    SyncFile(std::string path, std::uint64_t limit) : path_(std::move(path)), limit_(limit) {
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
        if (size > limit_ - bytes_) {
            throw std::runtime_error(
                "the primary's snapshot passes " + std::to_string(limit_) +
                " bytes, more than this replica could hold (--maxmemory, else the memory it may "
                "use); " +
                path_ + " removed");
        }
        if (const int failed = core::write_all(fd_, data, size); failed != 0) {
            throw std::runtime_error("cannot write " + path_ + ": " + std::strerror(failed));
        }
        bytes_ += size;
    }
    void close() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }
    const std::string& path() const { return path_; }
    std::uint64_t bytes() const { return bytes_; }

private:
    std::string path_;
    std::uint64_t limit_;
    int fd_ = -1;
    std::uint64_t bytes_ = 0;
};

ReplicaLink::ReplicaLink(const core::Config& config, store::Keyspace& keyspace,
                         persist::Manager& persistence, command::ReplicaGate& gate,
                         std::string host, std::uint16_t port,
                         boost::asio::ssl::context* tls_context,
                         std::function<Resumable()> before_start)
    : config_(config),
      keyspace_(keyspace),
      persistence_(persistence),
      gate_(gate),
      host_(std::move(host)),
      port_(port),
      before_start_(std::move(before_start)),
      stream_(std::make_unique<LinkStream>(io_, tls_context)) {
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
            const Resumable from = before_start_();
            before_start_ = nullptr;  // what it held (the link replaced) goes now
            if (from) {
                // The data here is that history's copy: the first PSYNC asks
                // to continue it (begin_session runs after this).
                std::lock_guard lock(info_mutex_);
                replid_ = from->replid;
                offset_ = read_offset_ = changes_offset_ = from->offset;
                applier_ = std::make_unique<persist::StreamApplier>(keyspace_);
            }
        }
        io_.run();
    });
}

void ReplicaLink::stop() {
    if (!thread_.joinable()) return;
    stopping_.store(true);
    asio::post(io_, [this] {
        ++session_;
        resolver_.cancel();
        stream_->close();
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
    info.link_tls = stream_->tls();
    info.replid = replid_.empty() ? std::string(40, '0') : replid_;
    info.offset = offset_;
    info.read_offset = read_offset_;
    info.link_up = up_;
    info.sync_in_progress = syncing_;
    info.sync_received_bytes = sync_bytes_;
    info.link_received_bytes = received_bytes_;
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
    spdlog::warn("replication: link to {}:{}{} failed: {}", host_, port_,
                 stream_->tls() ? " (TLS)" : "", why);
    ++session_;
    stream_->close();
    watchdog_.cancel();
    ack_timer_.cancel();
    writes_.clear();
    writing_ = false;
    ack_pending_ = false;
    sync_file_.reset();
    // Gives back what it held.
    decoder_.start(Handshake::replconf_first, SyncRequest::full_copy);
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
    stream_->async_write(asio::buffer(*text),
                         [this, session = session_, text](const error_code& error, std::size_t) {
                             if (stale(session)) return;
                             if (error) return fail(LinkStream::io_failure(error));
                             Step then = std::move(writes_.front().second);
                             writes_.pop_front();
                             write_next();
                             if (then) then();
                         });
}

void ReplicaLink::begin_session() {
    if (stopping_.load()) return;
    ++session_;
    SyncRequest request = SyncRequest::full_copy;
    {
        std::lock_guard lock(info_mutex_);
        // Only a replica holding a copy of this primary's history can resume.
        if (applier_ != nullptr && !replid_.empty()) request = SyncRequest::resume;
    }
    decoder_.start(config_.masterauth.empty() ? Handshake::replconf_first : Handshake::auth_first,
                   request);
    stream_->reset();
    // Bounds the TLS handshake too: a peer that accepts and never answers
    // fails the session at --repl-timeout.
    arm_watchdog();
    resolver_.async_resolve(
        host_, std::to_string(port_),
        [this, session = session_](const error_code& error,
                                   const asio::ip::tcp::resolver::results_type& endpoints) {
            if (stale(session)) return;
            if (error) return fail("cannot resolve " + host_ + ": " + error.message());
            asio::async_connect(
                stream_->socket(), endpoints,
                [this, session](const error_code& connect_error, const asio::ip::tcp::endpoint&) {
                    if (stale(session)) return;
                    if (connect_error) return fail(connect_error.message());
                    on_tcp_connected();
                });
        });
}

// Over TLS, nothing of the replica's (AUTH's password, REPLCONF) is sent
// before the primary's certificate verified.
void ReplicaLink::on_tcp_connected() {
    error_code ignored;
    stream_->socket().set_option(asio::ip::tcp::no_delay(true), ignored);
    stream_->async_handshake(host_, [this, session = session_](const error_code& error) {
        if (stale(session)) return;
        if (error) return fail(stream_->handshake_failure(error));
        if (stream_->tls()) {
            spdlog::info("replication: TLS handshake with {}:{} done, its certificate verified",
                         host_, port_);
        }
        on_connected();
    });
}

void ReplicaLink::on_connected() {
    // Each command waits for the answer to the one before (the decoder says
    // which came): after a refused AUTH, nothing else is sent.
    if (config_.masterauth.empty()) {
        write(command("REPLCONF", "listening-port", std::to_string(listening_port())));
    } else {
        write(config_.masteruser.empty() ? command("AUTH", config_.masterauth)
                                         : command("AUTH", config_.masteruser, config_.masterauth));
    }
    read_more();
}

std::uint16_t ReplicaLink::listening_port() const {
    return stream_->tls() && config_.tls_port != 0 ? config_.tls_port : config_.port;
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
    stream_->async_read_some(asio::buffer(chunk_),
                             [this, session = session_](const error_code& error, std::size_t n) {
                                 if (stale(session)) return;
                                 if (error) return fail(LinkStream::io_failure(error));
                                 arm_watchdog();
                                 decoder_.append(std::string_view(chunk_.data(), n));
                                 {
                                     std::lock_guard lock(info_mutex_);
                                     last_io_ms_ = store::now_ms();
                                     received_bytes_ += n;
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
                    write(command("REPLCONF", "listening-port", std::to_string(listening_port())));
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
    {
        std::lock_guard lock(info_mutex_);
        if (!decoder_.replid().empty()) replid_ = decoder_.replid();
        // Continued in another history (the primary's second id): the
        // offsets are that primary's from here on.
        if (decoder_.resume_offset()) {
            offset_ = read_offset_ = changes_offset_ = *decoder_.resume_offset();
        }
    }
    spdlog::info("replication: resuming from {}:{} at offset {} (partial resynchronization)", host_,
                 port_, applied_offset());
    go_up();
}

ReplicaLink::Resumable ReplicaLink::history() const {
    std::lock_guard lock(info_mutex_);
    if (applier_ == nullptr || replid_.empty()) return std::nullopt;
    return ReplicationSource::History{replid_, changes_offset_, 0};
}

// The snapshot arrives as "$EOF:<40-byte mark>\r\n", its bytes, the mark
// (Redis's diskless form). It goes to a file in --dir, at most
// largest_snapshot() bytes (past them the link fails and the file goes),
// then replaces the data (load_received).
void ReplicaLink::begin_full_sync() {
    {
        std::lock_guard lock(info_mutex_);
        syncing_ = true;
        sync_bytes_ = 0;
    }
    const std::string path = sync_file_path(config_.dir);
    remove_stale_sync_files(config_.dir, path);
    sync_file_ = std::make_unique<SyncFile>(path, largest_snapshot(config_));
}

void ReplicaLink::finish_full_sync() {
    sync_file_->close();
    load_received(sync_file_->path(), sync_file_->bytes());
    sync_file_.reset();
    arm_watchdog();  // the load took nothing from the socket
    {
        std::lock_guard lock(info_mutex_);
        replid_ = decoder_.replid();
        offset_ = read_offset_ = changes_offset_ = decoder_.offset();
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
    const core::Status loaded = persistence_.replace_dataset([&]() -> core::Status {
        core::Result<persist::LoadStats> read = persist::load_snapshot(path, keyspace_);
        if (!read) return read.failure();
        stats = *read;
        return {};
    });
    gate_.replication_flags.fetch_and(static_cast<std::uint8_t>(~command::kReplicationLoading));
    if (!loaded) {
        // Part of a copy is no copy: answer -MASTERDOWN until the next one.
        gate_.replication_flags.fetch_or(command::kReplicationUnsynced);
        throw std::runtime_error("cannot load the primary's snapshot: " + loaded.error());
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
    const persist::StreamApplier::Applied applied = applier_->apply(data);
    const std::size_t consumed = applied.consumed;
    decoder_.consume(consumed);
    {
        std::lock_guard lock(info_mutex_);
        if (applied.changes_end) changes_offset_ = offset_ + *applied.changes_end;
        offset_ += consumed;
        read_offset_ = offset_ + decoder_.buffered();
    }
    if (!applied.status) {
        // Our copy may now differ from the primary's: start over from a full one.
        applier_.reset();
        throw std::runtime_error(applied.status.error());
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
