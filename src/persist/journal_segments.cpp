// The journal's segment files: listing them when a history opens, creating
// a new one (its header durable before anything is appended to it), and
// deleting those a durable snapshot covers.

#include "journal_segments.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "bloomery/core/file_io.hpp"
#include "journal_format.hpp"
#include "snapshot_format.hpp"

namespace bloomery::persist {

namespace jf = journal_format;
static_assert(kJournalSegmentHeaderBytes == jf::kSegmentHeaderBytes);
using format::errno_text;

namespace {

std::string segment_header(std::uint64_t id, std::uint64_t start) {
    std::string header(jf::kSegmentHeaderBytes, '\0');
    auto* out = reinterpret_cast<unsigned char*>(header.data());
    std::memcpy(out, jf::kMagic, 8);
    format::put_u32(out + 8, jf::kVersion);
    format::put_u32(out + 12, 0);
    format::put_u64(out + 16, id);
    format::put_u64(out + 24, start);
    format::put_u64(out + 32, XXH64(out, 32, 0));
    return header;
}

}  // namespace

JournalSegments::JournalSegments(std::string dir, std::string basename)
    : dir_(std::move(dir)), basename_(std::move(basename)) {}

void JournalSegments::scan(const std::string& existing) {
    std::error_code ec;
    std::uint64_t total = 0;
    std::vector<Journal::SegmentFile> found;
    for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
        const std::string name = entry.path().filename().string();
        std::uint64_t start = 0;
        if (!jf::parse_segment_name(name, basename_, start)) continue;
        if (entry.path().string() == existing) continue;
        found.push_back({start, entry.path().string()});
        total += entry.file_size(ec);
    }
    std::sort(found.begin(), found.end(),
              [](const auto& a, const auto& b) { return a.start < b.start; });
    std::lock_guard lock(mutex_);
    segments_ = std::move(found);
    file_bytes_.store(total, std::memory_order_relaxed);
}

void JournalSegments::forget() {
    std::lock_guard lock(mutex_);
    segments_.clear();
}

void JournalSegments::adopt(const std::string& path, std::uint64_t bytes) {
    std::uint64_t start = 0;
    jf::parse_segment_name(std::filesystem::path(path).filename().string(), basename_, start);
    add(start, path, bytes);
}

void JournalSegments::add(std::uint64_t start, const std::string& path, std::uint64_t bytes) {
    std::lock_guard lock(mutex_);
    segments_.push_back({start, path});
    grew(bytes);
}

// Called when the journal opens, before its writer starts (and before any
// thread may write through), and by the writer under its file lock.
core::Result<JournalSegments::Created> JournalSegments::create(std::uint64_t start,
                                                               std::uint64_t id) {
    const std::string path = dir_ + "/" + jf::segment_name(basename_, start);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return core::Error{"cannot create journal '" + path + "': " + errno_text(errno)};
    const auto give_up = [&](std::string why) {
        ::close(fd);
        ::unlink(path.c_str());
        return core::Error{std::move(why)};
    };
    const std::string header = segment_header(id, start);
    if (const int failed = core::write_all(fd, header.data(), header.size()); failed != 0) {
        return give_up("cannot write journal '" + path + "': " + errno_text(failed));
    }
    if (::fdatasync(fd) != 0) {
        return give_up("cannot fsync journal '" + path + "': " + errno_text(errno));
    }
    if (const core::Status synced = core::fsync_directory(dir_); !synced) {
        return give_up(synced.error());
    }
    add(start, path, header.size());
    return Created{fd, path};
}

void JournalSegments::drop_covered(std::uint64_t offset) {
    std::vector<std::string> doomed;
    {
        std::lock_guard lock(mutex_);
        // Segment i ends where segment i + 1 starts; the last is open.
        std::size_t keep_from = 0;
        while (keep_from + 1 < segments_.size() && segments_[keep_from + 1].start <= offset) {
            ++keep_from;
        }
        for (std::size_t i = 0; i < keep_from; ++i) doomed.push_back(segments_[i].path);
        segments_.erase(segments_.begin(),
                        segments_.begin() + static_cast<std::ptrdiff_t>(keep_from));
    }
    std::uint64_t freed = 0;
    for (const std::string& path : doomed) {
        std::error_code ec;
        const std::uint64_t size = std::filesystem::file_size(path, ec);
        if (std::filesystem::remove(path, ec)) {
            freed += ec ? 0 : size;
        } else if (ec) {
            spdlog::warn("journal: cannot remove covered segment '{}': {}", path, ec.message());
        }
    }
    if (!doomed.empty()) {
        if (const core::Status synced = core::fsync_directory(dir_); !synced) {
            spdlog::warn("journal: {}", synced.error());
        }
        shrank(std::min(freed, file_bytes()));
        spdlog::info("journal: removed {} segment(s) covered by the snapshot", doomed.size());
    }
    mark_base();
}

std::vector<Journal::SegmentFile> JournalSegments::files() const {
    std::lock_guard lock(mutex_);
    return segments_;
}

std::size_t JournalSegments::count() const {
    std::lock_guard lock(mutex_);
    return segments_.size();
}

std::uint64_t JournalSegments::newest_start() const {
    std::lock_guard lock(mutex_);
    return segments_.back().start;
}

}  // namespace bloomery::persist
