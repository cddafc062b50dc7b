#pragma once
// Orchestrates snapshots for the server: the load at start, SAVE (on the
// persistence thread, reporting back when durable), BGSAVE (the same thread,
// nobody waiting), save points checked by the server's cron, the final save at
// exit (synchronous), and the state INFO persistence reports. Knows nothing of
// sockets.
//
// Thread safety: every member may be called from any thread; one snapshot
// runs at a time.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bloomery/core/config.hpp"
#include "bloomery/core/result.hpp"
#include "bloomery/persist/journal.hpp"
#include "bloomery/persist/snapshot.hpp"
#include "bloomery/persist/status.hpp"
#include "bloomery/store/keyspace.hpp"

namespace bloomery::persist {

class Manager {
public:
    // `total_changes` returns the server's running count of writes.
    Manager(const core::Config& config, store::Keyspace& keyspace,
            std::function<std::uint64_t()> total_changes);
    ~Manager();

    // Creates --dir if needed, loads the snapshot if one exists, and with
    // --appendonly yes replays the journal after it and opens the journal for
    // appending (attached to the keyspace). Fails with a message naming the
    // file and the reason if either is bad. Keys past their deadline are
    // kept and deadlines are not judged while records are redone: the
    // keyspace follows deadlines (store::Deadlines) when this returns.
    core::Status load();
    // For a server that serves as the primary once loaded: from now on it
    // decides deadlines, and the keys loaded past theirs are erased at
    // once, each with its DEL record (so replicas and a later replay
    // follow). Returns how many (INFO's rdb_last_load_keys_expired).
    std::uint64_t enforce_deadlines();
    // The journal, or null with --appendonly no (or before load(), or while
    // a replica's full synchronization replaces the data). There is one
    // journal object for the Manager's life: a full synchronization closes
    // it and opens it again on a new history, so a pointer read here stays
    // valid.
    Journal* journal() const { return journal_.load(std::memory_order_acquire); }
    // Called on the journal's writer thread after each write (the
    // replication source wakes replica feeds with it); applies to the
    // journal of now and every later one. Set before serving.
    void set_journal_listener(std::function<void(std::uint64_t written)> listener);
    // The oldest journal offset replicas may still ask for: segments from
    // there on are kept after a snapshot covers them (UINT64_MAX: none).
    void set_replication_floor(std::uint64_t offset) {
        replication_floor_.store(offset, std::memory_order_relaxed);
    }
    // A replica's full synchronization: waits for a running save, detaches
    // and closes the journal, clears the keyspace, runs `load` (which fills
    // it from the primary's snapshot), deletes the old journal's segments
    // and starts a new journal (new id, offset 0), then starts a background
    // save so the replica's own files cover the new data. Fails with the
    // reason if `load` or the new journal failed (the keyspace is then
    // whatever `load` left; the caller resynchronizes).
    core::Status replace_dataset(const std::function<core::Status()>& load);
    // Writes and fsyncs the journal and detaches it (at exit, after the last
    // command ran).
    void close_journal();

    persist::SaveResult save();  // synchronous; in_progress if a save is running
    // Runs a save on the persistence thread and calls `done` there once the
    // file is durable or the save failed; if a save is running, calls `done`
    // with in_progress at once, on the caller's thread. Not counted as a
    // background save in INFO (it is SAVE).
    void save_async(std::function<void(persist::SaveResult)> done);
    persist::SaveResult bgsave();  // starts a background save
    // Called every 100 ms: starts a background save when a save point is due.
    void tick();
    // Waits for a running background save to finish.
    void wait();
    bool saving_enabled() const { return !config_.save_points.empty(); }
    // Save points are configured and the last save (SAVE, BGSAVE or a save
    // point) failed; cleared by the next successful one. Lock-free.
    bool snapshot_failing() const {
        return saving_enabled() && last_failed_.load(std::memory_order_relaxed);
    }

    persist::PersistenceInfo info() const;

private:
    // Which command a save on the persistence thread runs for: SAVE (a
    // client waits for it) or BGSAVE and save points (INFO's
    // rdb_bgsave_in_progress).
    enum class SaveKind { save, bgsave };

    // load()'s steps: --dir made and cleared of temporary files; the
    // snapshot loaded if there is one (its stats; none without it); the
    // journal replayed after it and opened for appending.
    core::Status prepare_directory();
    core::Result<std::optional<LoadStats>> load_snapshot_file();
    core::Status replay_and_open_journal(const std::optional<LoadStats>& snapshot);
    // Saves a snapshot of journal `id` now if the loaded one is of no
    // journal or another, so the journal's records follow it at the next
    // start.
    core::Status tie_snapshot_to_journal(const std::optional<LoadStats>& snapshot,
                                         std::uint64_t id);
    // --appendonly no with journal segments in --dir: says they are not
    // loaded.
    void warn_of_unloaded_journal() const;

    persist::SaveResult save_locked();  // requires running_ to be owned
    // Whether the journal grew past --auto-aof-rewrite-* and no save runs.
    bool journal_outgrew_snapshot();
    // Starts the persistence thread; requires mutex_ held and !running_.
    void start_thread_locked(SaveKind kind, std::function<void(persist::SaveResult)> done);
    // Books a save's outcome for INFO persistence and -MISCONF.
    void record(const core::Result<SaveStats>& saved, std::uint64_t changes_at_start,
                double seconds);

    const core::Config& config_;
    store::Keyspace& keyspace_;
    std::function<std::uint64_t()> total_changes_;

    std::atomic<bool> last_failed_{false};
    mutable std::mutex mutex_;  // guards everything below
    std::condition_variable finished_;
    bool running_ = false;
    bool running_background_ = false;
    std::int64_t started_ms_ = 0;
    std::thread background_;
    std::uint64_t changes_at_last_save_ = 0;
    std::int64_t last_save_time_ = 0;
    std::int64_t last_attempt_ms_ = 0;
    bool last_ok_ = true;
    std::int64_t last_duration_sec_ = -1;
    double last_duration_seconds_ = -1;
    std::uint64_t saves_ = 0;
    std::uint64_t last_bytes_ = 0;
    // The snapshot on disk, loaded at start or saved since: with the journal
    // after it, what Redis's auto-aof-rewrite measures as the AOF.
    std::uint64_t snapshot_bytes_ = 0;
    std::uint64_t last_keys_ = 0;
    std::string last_error_;
    std::uint64_t loaded_keys_ = 0;
    std::uint64_t loaded_expired_keys_ = 0;
    double load_seconds_ = 0;
    std::uint64_t replayed_records_ = 0;
    // Opens a new journal (`id`, appending at `offset` to `existing` or to
    // a new segment), attaches it to the keyspace and makes it current.
    core::Status open_journal(std::uint64_t id, std::uint64_t offset, const std::string& existing);

    std::atomic<Journal*> journal_{nullptr};
    std::unique_ptr<Journal> journal_object_;  // made by the first open_journal()
    std::function<void(std::uint64_t)> journal_listener_;
    std::atomic<std::uint64_t> replication_floor_{~std::uint64_t{0}};
};

}  // namespace bloomery::persist
