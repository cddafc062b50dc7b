#include "bloomery/persist/manager.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <filesystem>

#include "bloomery/core/latency_monitor.hpp"
#include "bloomery/persist/journal_reader.hpp"
#include "bloomery/persist/snapshot.hpp"

namespace bloomery::persist {

namespace {
std::int64_t now_seconds() {
    return store::now_ms() / 1000;
}

FsyncPolicy fsync_policy(core::AppendFsync setting) {
    switch (setting) {
        case core::AppendFsync::always:
            return FsyncPolicy::always;
        case core::AppendFsync::no:
            return FsyncPolicy::no;
        case core::AppendFsync::everysec:
            break;
    }
    return FsyncPolicy::everysec;
}
}  // namespace

Manager::Manager(const core::Config& config, store::Keyspace& keyspace,
                 std::function<std::uint64_t()> total_changes)
    : config_(config), keyspace_(keyspace), total_changes_(std::move(total_changes)) {
    last_save_time_ = now_seconds();
    last_attempt_ms_ = store::now_ms();
}

Manager::~Manager() {
    wait();
    close_journal();
}

void Manager::close_journal() {
    Journal* journal = this->journal();
    if (journal == nullptr) return;
    journal->close();
    keyspace_.set_mutation_log(nullptr);
}

void Manager::set_journal_listener(std::function<void(std::uint64_t)> listener) {
    journal_listener_ = std::move(listener);
    // The current journal's writer may already run: it reads its listener
    // without a lock, so it gets one only through open_journal(). Set this
    // before load() (main.cpp does).
}

core::Status Manager::open_journal(std::uint64_t id, std::uint64_t offset,
                                   const std::string& existing) {
    const FsyncPolicy policy = fsync_policy(config_.appendfsync);
    if (!journal_object_) {
        journal_object_ = std::make_unique<Journal>(config_.dir, config_.appendfilename, policy,
                                                    config_.journal_buffer_limit);
        if (journal_listener_) journal_object_->set_write_listener(journal_listener_);
    }
    if (core::Status opened = journal_object_->open(id, offset, existing); !opened) return opened;
    journal_.store(journal_object_.get(), std::memory_order_release);
    keyspace_.set_mutation_log(journal_object_.get());
    return {};
}

core::Status Manager::replace_dataset(const std::function<core::Status()>& load) {
    // No save may run while the journal changes under it: hold the save
    // slot (running_) for the whole replacement.
    {
        std::unique_lock lock(mutex_);
        finished_.wait(lock, [this] { return !running_; });
        running_ = true;
        started_ms_ = store::now_ms();
    }
    const auto release = [this] {
        {
            std::lock_guard lock(mutex_);
            running_ = false;
        }
        finished_.notify_all();
    };
    Journal* old = journal();
    std::vector<Journal::SegmentFile> old_segments;
    if (old != nullptr) {
        old->close();
        old_segments = old->segment_files();
    }
    keyspace_.set_mutation_log(nullptr);
    journal_.store(nullptr, std::memory_order_release);
    keyspace_.clear();
    if (core::Status loaded = load(); !loaded) {
        release();
        return loaded;
    }
    if (config_.appendonly) {
        // The old history no longer describes the data: its segments go,
        // and a new journal starts at 0.
        for (const Journal::SegmentFile& segment : old_segments) {
            std::error_code ec;
            std::filesystem::remove(segment.path, ec);
        }
        if (core::Status opened = open_journal(new_journal_id(), 0, ""); !opened) {
            release();
            return opened;
        }
    }
    release();
    // Until this save is durable, a restart finds the old snapshot and sets
    // the new journal's segments aside: a replica resynchronizes anyway.
    bgsave();
    return {};
}

core::Status Manager::prepare_directory() {
    std::error_code ec;
    std::filesystem::create_directories(config_.dir, ec);
    if (ec)
        return core::Error{"cannot create data directory '" + config_.dir + "': " + ec.message()};
    // A crash during a save leaves its temporary file behind; nothing reads
    // it, so remove it rather than let them pile up across restarts.
    const std::string temp_prefix = config_.dbfilename + ".tmp-";
    for (const auto& entry : std::filesystem::directory_iterator(config_.dir, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind(temp_prefix, 0) == 0 && entry.is_regular_file(ec)) {
            spdlog::info("removing {} left by an interrupted save", entry.path().string());
            std::filesystem::remove(entry.path(), ec);
        }
    }
    return {};
}

core::Result<std::optional<LoadStats>> Manager::load_snapshot_file() {
    const std::string path = config_.snapshot_path();
    std::error_code ec;
    std::optional<LoadStats> loaded;
    if (!std::filesystem::exists(path, ec)) {
        spdlog::info("no snapshot at {}", path);
    } else {
        core::Result<LoadStats> stats = load_snapshot(path, keyspace_);
        if (!stats) return stats.failure();
        spdlog::info(
            "loaded {} filters ({} bytes) from {} in {:.3f} s ({} past their deadline, kept "
            "until the journal is replayed)",
            stats->keys, stats->bytes, path, stats->seconds, stats->past_deadline);
        loaded = *stats;
    }
    const LoadStats counted = loaded.value_or(LoadStats{});
    std::lock_guard lock(mutex_);
    // As Redis counts them: the keys that were live when loaded (those past
    // their deadline are counted when they expire, after replay).
    loaded_keys_ = counted.keys - counted.past_deadline;
    load_seconds_ = counted.seconds;
    snapshot_bytes_ = counted.bytes;
    return loaded;
}

void Manager::warn_of_unloaded_journal() const {
    std::error_code ec;
    const std::string prefix = config_.appendfilename + ".";
    for (const auto& entry : std::filesystem::directory_iterator(config_.dir, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind(prefix, 0) == 0 && name.find(".stale") == std::string::npos) {
            spdlog::warn(
                "journal segment {} is not loaded (--appendonly no): changes it holds after "
                "the snapshot are not in this server",
                entry.path().string());
            return;
        }
    }
}

core::Status Manager::replay_and_open_journal(const std::optional<LoadStats>& snapshot) {
    std::optional<JournalCoverage> covered;
    if (snapshot) covered = JournalCoverage{snapshot->journal_id, snapshot->journal_offset};
    const core::Result<ReplayStats> replayed =
        replay_journal(config_.dir, config_.appendfilename, covered, keyspace_);
    if (!replayed) return replayed.failure();
    const ReplayStats& replay = *replayed;
    const std::uint64_t id = replay.id != 0 ? replay.id : new_journal_id();
    if (replay.segments != 0) {
        spdlog::info(
            "replayed {} journal records ({} before the snapshot skipped) from {} segment(s) in "
            "{:.3f} s",
            replay.records, replay.skipped, replay.segments, replay.seconds);
    }
    if (core::Status opened = open_journal(id, replay.end, replay.last_segment); !opened) {
        return opened;
    }
    {
        std::lock_guard lock(mutex_);
        replayed_records_ = replay.records;
        load_seconds_ += replay.seconds;
    }
    spdlog::info("journal on (appendfsync {}), id {:016x}, appending at offset {}",
                 fsync_policy_name(fsync_policy(config_.appendfsync)), id, replay.end);
    return tie_snapshot_to_journal(snapshot, id);
}

core::Status Manager::tie_snapshot_to_journal(const std::optional<LoadStats>& snapshot,
                                              std::uint64_t id) {
    // A snapshot of no journal or another one (--import-rdb's, one saved
    // with --appendonly no) is followed at the next start only by segments
    // of its own journal: the new journal's records would be set aside and
    // every write after this start lost. A snapshot of the new journal, at
    // its start, before any client writes, makes the two one history.
    if (!snapshot || snapshot->journal_id == id) return {};
    spdlog::info(
        "the snapshot belongs to no journal of this directory: saving one of journal "
        "{:016x} before serving",
        id);
    const persist::SaveResult saved = save();
    if (!saved.ok()) {
        return core::Error{"cannot save the snapshot that starts the journal: " + saved.detail};
    }
    return {};
}

core::Status Manager::load() {
    if (core::Status prepared = prepare_directory(); !prepared) return prepared;
    // What the snapshot and the journal recorded is redone as it was
    // decided: a deadline passed since on this clock erases nothing yet (a
    // record after it may remove it).
    keyspace_.set_deadlines(store::Deadlines::follow);
    const core::Result<std::optional<LoadStats>> snapshot = load_snapshot_file();
    if (!snapshot) return snapshot.failure();
    if (!config_.appendonly) {
        warn_of_unloaded_journal();
        return {};
    }
    return replay_and_open_journal(*snapshot);
}

std::uint64_t Manager::enforce_deadlines() {
    keyspace_.set_deadlines(store::Deadlines::enforce);
    const std::uint64_t expired = keyspace_.expire_past_deadlines();
    if (expired != 0) spdlog::info("{} keys loaded past their deadline expired", expired);
    std::lock_guard lock(mutex_);
    loaded_expired_keys_ = expired;
    return expired;
}

persist::SaveResult Manager::save_locked() {
    const std::uint64_t changes_at_start = total_changes_();
    const auto started = std::chrono::steady_clock::now();
    // Seal the journal's current segment first: every segment before the new
    // one then ends before the snapshot's position and can go once the
    // snapshot is durable.
    Journal* journal = this->journal();
    if (journal != nullptr) journal->rotate();
    const core::Result<SaveStats> saved = save_snapshot(keyspace_, config_.snapshot_path());
    // Segments a replica may still ask for stay (set_replication_floor).
    if (saved && journal != nullptr) {
        journal->drop_covered(
            std::min(saved->journal_offset, replication_floor_.load(std::memory_order_relaxed)));
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    record(saved, changes_at_start, seconds);
    core::latency_add_sample_if_needed(core::kLatencySnapshot,
                                       static_cast<std::uint64_t>(seconds * 1000));
    if (!saved) {
        spdlog::error("snapshot failed: {}", saved.error());
        return {persist::SaveStatus::failed, saved.error()};
    }
    spdlog::info("snapshot saved: {} filters, {} bytes, {:.3f} s", saved->keys, saved->bytes,
                 seconds);
    return {};
}

void Manager::record(const core::Result<SaveStats>& saved, std::uint64_t changes_at_start,
                     double seconds) {
    const bool ok = saved.ok();
    std::lock_guard lock(mutex_);
    last_ok_ = ok;
    last_failed_.store(!ok, std::memory_order_relaxed);
    last_duration_sec_ = std::llround(seconds);
    last_duration_seconds_ = seconds;
    last_attempt_ms_ = store::now_ms();
    if (ok) {
        // Writes that raced with the snapshot may or may not be in it, so they
        // still count as unsaved: only changes before the start are covered.
        changes_at_last_save_ = changes_at_start;
        last_save_time_ = now_seconds();
        ++saves_;
        last_bytes_ = saved->bytes;
        snapshot_bytes_ = saved->bytes;
        last_keys_ = saved->keys;
        last_error_.clear();
    } else {
        last_error_ = saved.error();
    }
}

persist::SaveResult Manager::save() {
    {
        std::unique_lock lock(mutex_);
        if (running_) return {persist::SaveStatus::in_progress, {}};
        running_ = true;
        started_ms_ = store::now_ms();
    }
    persist::SaveResult result = save_locked();
    {
        std::lock_guard lock(mutex_);
        running_ = false;
    }
    finished_.notify_all();
    return result;
}

void Manager::save_async(std::function<void(persist::SaveResult)> done) {
    {
        std::lock_guard lock(mutex_);
        if (!running_) {
            start_thread_locked(SaveKind::save, std::move(done));
            return;
        }
    }
    done({persist::SaveStatus::in_progress, {}});
}

persist::SaveResult Manager::bgsave() {
    std::lock_guard lock(mutex_);
    if (running_) return {persist::SaveStatus::in_progress, {}};
    start_thread_locked(SaveKind::bgsave, nullptr);
    return {};
}

void Manager::start_thread_locked(SaveKind kind, std::function<void(persist::SaveResult)> done) {
    // A finished thread may still be running the previous `done`; it never
    // takes mutex_ after clearing running_, so joining here cannot deadlock.
    if (background_.joinable()) background_.join();
    running_ = true;
    running_background_ = kind == SaveKind::bgsave;
    started_ms_ = store::now_ms();
    background_ = std::thread([this, done = std::move(done)] {
        persist::SaveResult result = save_locked();
        {
            std::lock_guard inner(mutex_);
            running_ = false;
            running_background_ = false;
        }
        finished_.notify_all();
        // After running_ is cleared, so whoever hears "done" can save again.
        if (done) done(std::move(result));
    });
}

bool Manager::journal_outgrew_snapshot() {
    Journal* journal = this->journal();
    if (journal == nullptr || config_.auto_aof_rewrite_percentage == 0) return false;
    // Redis's auto-aof-rewrite, which here is a snapshot after which the
    // journal it covers is dropped. As Redis's AOF is its base file and the
    // increments after it, the size measured is the snapshot's plus the
    // journal's: a large keyspace is saved after its journal grew by the
    // percentage of all of it, not after every min-size of journal.
    const persist::JournalInfo j = journal->info();
    std::lock_guard lock(mutex_);
    const std::uint64_t current = snapshot_bytes_ + j.current_size;
    const std::uint64_t base = snapshot_bytes_ + j.base_size;
    // In doubles: base times a percentage up to 2^31 overflows 64 bits.
    const bool grown =
        current > base &&
        static_cast<double>(current - base) * 100.0 >
            static_cast<double>(base) * static_cast<double>(config_.auto_aof_rewrite_percentage);
    if (current < config_.auto_aof_rewrite_min_size || !grown) return false;
    // After a failure, no sooner than 5 s later.
    if (running_ || (!last_ok_ && store::now_ms() - last_attempt_ms_ < 5000)) return false;
    spdlog::info(
        "journal is {} bytes and the snapshot {}: grown from {} since the snapshot, saving",
        j.current_size, snapshot_bytes_, base);
    return true;
}

void Manager::tick() {
    if (journal_outgrew_snapshot()) {
        bgsave();
        return;
    }
    if (config_.save_points.empty()) return;
    std::uint64_t changes;
    std::int64_t since_save_s, since_attempt_s;
    {
        std::lock_guard lock(mutex_);
        if (running_) return;
        changes = total_changes_() - changes_at_last_save_;
        since_save_s = now_seconds() - last_save_time_;
        since_attempt_s = (store::now_ms() - last_attempt_ms_) / 1000;
        // After a failure, retry no sooner than 5 s later (Redis's
        // CONFIG_BGSAVE_RETRY_DELAY), so a full disk is not hammered.
        if (!last_ok_ && since_attempt_s < 5) return;
    }
    if (changes == 0) return;
    for (const core::SavePoint& point : config_.save_points) {
        if (changes >= static_cast<std::uint64_t>(point.changes) && since_save_s >= point.seconds) {
            spdlog::info("{} changes in {} seconds. Saving...", point.changes, point.seconds);
            bgsave();
            return;
        }
    }
}

void Manager::wait() {
    std::thread finished;
    {
        std::unique_lock lock(mutex_);
        finished_.wait(lock, [this] { return !running_; });
        finished.swap(background_);
    }
    if (finished.joinable()) finished.join();
}

persist::PersistenceInfo Manager::info() const {
    persist::PersistenceInfo info;
    std::lock_guard lock(mutex_);
    info.enabled = !config_.save_points.empty();
    info.bgsave_in_progress = running_background_;
    info.changes_since_last_save = total_changes_() - changes_at_last_save_;
    info.last_save_time = last_save_time_;
    info.last_bgsave_ok = last_ok_;
    info.last_bgsave_time_sec = last_duration_sec_;
    info.last_save_duration_seconds = last_duration_seconds_;
    info.current_bgsave_time_sec = running_ ? (store::now_ms() - started_ms_) / 1000 : -1;
    info.saves = saves_;
    info.last_save_bytes = last_bytes_;
    info.last_save_keys = last_keys_;
    info.last_error = last_error_;
    info.loaded_keys = loaded_keys_;
    info.loaded_expired_keys = loaded_expired_keys_;
    info.load_seconds = load_seconds_;
    info.replayed_records = replayed_records_;
    if (Journal* journal = this->journal()) info.journal = journal->info();
    return info;
}

}  // namespace bloomery::persist
