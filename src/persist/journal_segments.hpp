#pragma once
// The journal's segment files on disk (journal_segments.cpp): which there
// are, oldest first (the last is being written), how many bytes they hold,
// making a new one and deleting those a snapshot covers. The writer
// (journal_writer.hpp) owns one. Every member may be called from any
// thread; its lock is taken last (after the writer's file lock and the
// handoff's mutex) and nothing is locked under it.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "bloomery/core/result.hpp"
#include "bloomery/persist/journal.hpp"

namespace bloomery::persist {

class JournalSegments {
public:
    JournalSegments(std::string dir, std::string basename);

    // A new history begins: no segment is known until scan().
    void forget();
    // Lists the segments of the journal already in the directory (every
    // older one stays until a snapshot covers it), except `existing`, which
    // the caller then adopts.
    void scan(const std::string& existing);
    // The existing segment at `path`, of `bytes`, continues as the newest.
    void adopt(const std::string& path, std::uint64_t bytes);

    struct Created {
        int fd;  // open for writing, after the header
        std::string path;
    };
    // Creates the segment file for `start` of journal `id`: writes and
    // fdatasyncs its header and fsyncs the directory; it is the newest then.
    core::Result<Created> create(std::uint64_t start, std::uint64_t id);

    // Deletes the sealed segments that end at or before `offset`.
    void drop_covered(std::uint64_t offset);

    std::vector<Journal::SegmentFile> files() const;
    std::size_t count() const;
    std::uint64_t newest_start() const;

    // Bytes in every segment file, headers included: they grow as records
    // are written, and shrink when a file is cut back.
    void grew(std::uint64_t bytes) { file_bytes_.fetch_add(bytes, std::memory_order_relaxed); }
    void shrank(std::uint64_t bytes) { file_bytes_.fetch_sub(bytes, std::memory_order_relaxed); }
    std::uint64_t file_bytes() const { return file_bytes_.load(std::memory_order_relaxed); }
    // file_bytes() after the journal opened or a snapshot last dropped
    // segments (INFO's aof_base_size).
    std::uint64_t base_bytes() const { return base_bytes_.load(std::memory_order_relaxed); }
    void mark_base() { base_bytes_.store(file_bytes(), std::memory_order_relaxed); }

private:
    void add(std::uint64_t start, const std::string& path, std::uint64_t bytes);

    const std::string dir_;
    const std::string basename_;
    mutable std::mutex mutex_;  // guards segments_
    std::vector<Journal::SegmentFile> segments_;
    std::atomic<std::uint64_t> file_bytes_{0};
    std::atomic<std::uint64_t> base_bytes_{0};
};

}  // namespace bloomery::persist
