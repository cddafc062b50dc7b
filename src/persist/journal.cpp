#include "bloomery/persist/journal.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>

#include "bloomery/bloom/dump.hpp"
#include "bloomery/core/file_io.hpp"
#include "bloomery/core/memory.hpp"
#include "journal_format.hpp"
#include "snapshot_format.hpp"

namespace bloomery::persist {

namespace jf = journal_format;
static_assert(kJournalSegmentHeaderBytes == jf::kSegmentHeaderBytes);
using format::errno_text;
using format::put_u32;
using format::put_u64;

namespace {

std::int64_t steady_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

std::string segment_header(std::uint64_t id, std::uint64_t start) {
    std::string header(jf::kSegmentHeaderBytes, '\0');
    auto* out = reinterpret_cast<unsigned char*>(header.data());
    std::memcpy(out, jf::kMagic, 8);
    put_u32(out + 8, jf::kVersion);
    put_u32(out + 12, 0);
    put_u64(out + 16, id);
    put_u64(out + 24, start);
    put_u64(out + 32, XXH64(out, 32, 0));
    return header;
}

}  // namespace

bool parse_fsync_policy(std::string_view text, FsyncPolicy& out) {
    if (text == "always") {
        out = FsyncPolicy::always;
    } else if (text == "everysec") {
        out = FsyncPolicy::everysec;
    } else if (text == "no") {
        out = FsyncPolicy::no;
    } else {
        return false;
    }
    return true;
}

const char* fsync_policy_name(FsyncPolicy policy) {
    switch (policy) {
        case FsyncPolicy::always:
            return "always";
        case FsyncPolicy::everysec:
            return "everysec";
        default:
            return "no";
    }
}

std::uint64_t new_journal_id() {
    std::random_device device;
    std::uint64_t id = 0;
    while (id == 0) id = (std::uint64_t{device()} << 32) ^ device();
    return id;
}

namespace {
std::atomic<std::uint64_t> g_journal_serial{0};
}

// One thread's records not yet in the stream: a scope's ADD record being
// built, or whole records waiting for the writer. Its mutex is held by the
// owning thread for a whole data scope, and taken by the writer, position()
// and cut() to move its records into the stream.
class Journal::LocalBuffer final : public bloom::AddRecorder {
public:
    std::mutex mutex;
    store::RecordBlock* block = nullptr;  // owned; null until first used
    std::atomic<std::size_t> bytes{0};    // block's size, read without the mutex
    // A scope is open: records may be in the block that `bytes` does not
    // count yet (set at begin, cleared at end_data()).
    std::atomic<bool> open{false};
    std::size_t charged = 0;    // block's capacity counted in memory (owner)
    std::size_t size_hint = 0;  // bytes the last block taken held (at most 2 × kLocalFlushBytes)

    // The open scope (under the mutex, owning thread).
    enum class Scope { none, adds, chunk } scope = Scope::none;
    std::size_t record_start = 0;  // offset of the open ADD record in the block
    std::uint32_t entries = 0;
    std::uint32_t max_entries = 0;
    unsigned char* next_entry = nullptr;  // where the next ADD entry goes

    bool record(std::uint32_t layer, const bloom::ItemHash& hash) noexcept override {
        if (scope != Scope::adds || entries == max_entries || layer > 255) return false;
        // Into the space begin_adds() sized for the whole batch: no
        // allocation, and a plain store per field (appending 17 bytes to the
        // string cost BF.MADD 46 more instructions per item).
        unsigned char* entry = next_entry;
        entry[0] = static_cast<unsigned char>(layer);
        put_u64(entry + 1, hash.h1);
        put_u64(entry + 9, hash.h2);
        next_entry += jf::kAddEntryBytes;
        ++entries;
        return true;
    }

    // Makes room for `more` bytes after what the block holds (may throw
    // std::bad_alloc, changing nothing but capacity).
    void reserve(std::size_t more) {
        if (block == nullptr) {
            block = new store::RecordBlock;
            // As much as the block before held when it was taken: a thread
            // adding steadily allocates one block per take, sized once.
            block->bytes.reserve(std::max(more, size_hint));
        }
        std::string& out = block->bytes;
        if (out.capacity() - out.size() < more) {
            out.reserve(std::max(out.size() + more,
                                 std::min<std::size_t>(2 * out.capacity(), kLocalFlushBytes * 2)));
        }
        if (out.capacity() != charged) {
            core::memory_add(core::MemoryUse::other, static_cast<std::int64_t>(out.capacity()) -
                                                         static_cast<std::int64_t>(charged));
            charged = out.capacity();
        }
    }
};

void Journal::BlockList::push(store::RecordBlock* block) noexcept {
    while (block != nullptr) {
        store::RecordBlock* next = block->next;
        block->next = nullptr;
        bytes += block->bytes.size();
        if (tail == nullptr) {
            head = tail = block;
        } else {
            tail->next = block;
            tail = block;
        }
        block = next;
    }
}

void Journal::BlockList::splice(BlockList& other) noexcept {
    if (other.head == nullptr) return;
    if (tail == nullptr) {
        head = other.head;
    } else {
        tail->next = other.head;
    }
    tail = other.tail;
    bytes += other.bytes;
    other.head = other.tail = nullptr;
    other.bytes = 0;
}

void Journal::BlockList::clear() noexcept {
    std::int64_t freed = 0;
    while (head != nullptr) {
        store::RecordBlock* next = head->next;
        freed += static_cast<std::int64_t>(head->bytes.capacity());
        delete head;
        head = next;
    }
    tail = nullptr;
    bytes = 0;
    if (freed != 0) core::memory_add(core::MemoryUse::other, -freed);
}

Journal::Journal(std::string dir, std::string basename, FsyncPolicy policy,
                 std::uint64_t buffer_limit)
    : dir_(std::move(dir)),
      basename_(std::move(basename)),
      policy_(policy),
      buffer_limit_(buffer_limit),
      locals_(new LocalBuffer[kLocalBuffers + 1]),
      serial_(g_journal_serial.fetch_add(1, std::memory_order_relaxed) + 1) {}

Journal::~Journal() {
    close();
    release_locals();
    pending_.clear();
    unwritten_.clear();
    unsynced_.clear();
}

void Journal::release_locals() {
    for (std::size_t i = 0; i <= kLocalBuffers; ++i) {
        LocalBuffer& local = locals_[i];
        std::lock_guard lock(local.mutex);
        if (local.block == nullptr) continue;
        core::memory_add(core::MemoryUse::other, -static_cast<std::int64_t>(local.charged));
        delete local.block;
        local.block = nullptr;
        local.charged = 0;
        local.bytes.store(0, std::memory_order_relaxed);
    }
}

bool Journal::open(std::uint64_t id, std::uint64_t offset, const std::string& existing,
                   std::string& error) {
    {
        std::lock_guard lock(mutex_);
        if (writer_.joinable()) {
            error = "journal is already open";
            return false;
        }
        {
            std::lock_guard waiters(waiters_mutex_);
            id_.store(id, std::memory_order_release);
        }
        stop_ = false;
        rotate_requested_ = false;
        rotations_done_ = 0;
        rotated_to_ = 0;
        segments_.clear();
        failure_.clear();
        failing_.store(false, std::memory_order_relaxed);
        write_failed_ = false;
        appended_.store(offset, std::memory_order_relaxed);
    }
    durable_.store(offset, std::memory_order_relaxed);
    written_ = offset;
    written_offset_.store(offset, std::memory_order_relaxed);
    segment_size_ = synced_segment_size_ = 0;
    fd_ = -1;
    current_path_.clear();
    // Every older segment of this journal is still on disk until a snapshot
    // covers it; list them so drop_covered() can remove them.
    std::error_code ec;
    std::uint64_t total = 0;
    std::vector<Segment> found;
    for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
        const std::string name = entry.path().filename().string();
        std::uint64_t start = 0;
        if (!jf::parse_segment_name(name, basename_, start)) continue;
        if (entry.path().string() == existing) continue;
        found.push_back({start, entry.path().string()});
        total += entry.file_size(ec);
    }
    std::sort(found.begin(), found.end(),
              [](const Segment& a, const Segment& b) { return a.start < b.start; });
    {
        std::lock_guard lock(mutex_);
        segments_ = std::move(found);
    }
    if (!existing.empty()) {
        fd_ = ::open(existing.c_str(), O_WRONLY | O_CLOEXEC);
        if (fd_ < 0) {
            error = "cannot open journal '" + existing + "': " + errno_text(errno);
            return false;
        }
        const off_t end = ::lseek(fd_, 0, SEEK_END);
        if (end < 0) {
            error = "cannot seek in journal '" + existing + "': " + errno_text(errno);
            ::close(fd_);
            fd_ = -1;
            return false;
        }
        segment_size_ = synced_segment_size_ = static_cast<std::uint64_t>(end);
        std::uint64_t start = 0;
        jf::parse_segment_name(std::filesystem::path(existing).filename().string(), basename_,
                               start);
        {
            std::lock_guard lock(mutex_);
            segments_.push_back({start, existing});
        }
        total += segment_size_;
        current_path_ = existing;
        file_bytes_.store(total, std::memory_order_relaxed);
    } else {
        file_bytes_.store(total, std::memory_order_relaxed);
        if (!open_segment(offset, error)) return false;
        total += jf::kSegmentHeaderBytes;
    }
    base_bytes_.store(total, std::memory_order_relaxed);
    last_sync_ms_ = steady_ms();
    writer_ = std::thread([this] { run(); });
    return true;
}

// Creates the segment file for `start`, writes and syncs its header and the
// directory. Called by open() before the writer starts, and by the writer.
bool Journal::open_segment(std::uint64_t start, std::string& error) {
    const std::string path = dir_ + "/" + jf::segment_name(basename_, start);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        error = "cannot create journal '" + path + "': " + errno_text(errno);
        return false;
    }
    const std::string header = segment_header(log_id(), start);
    if (const int failed = core::write_all(fd, header.data(), header.size()); failed != 0) {
        error = "cannot write journal '" + path + "': " + errno_text(failed);
        ::close(fd);
        ::unlink(path.c_str());
        return false;
    }
    if (::fdatasync(fd) != 0 || !core::fsync_directory(dir_, error)) {
        if (error.empty()) error = "cannot fsync journal '" + path + "': " + errno_text(errno);
        ::close(fd);
        ::unlink(path.c_str());
        return false;
    }
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
    segment_size_ = synced_segment_size_ = header.size();
    current_path_ = path;
    file_bytes_.fetch_add(header.size(), std::memory_order_relaxed);
    std::lock_guard lock(mutex_);
    segments_.push_back({start, path});
    return true;
}

void Journal::close() {
    {
        std::lock_guard lock(mutex_);
        if (!writer_.joinable()) return;
        stop_ = true;
    }
    wake_.notify_all();
    writer_.join();
    if (fd_ >= 0) {
        ::close(fd_);
        fd_ = -1;
    }
    // The threads' buffers and the writer's lists are empty now (the writer
    // wrote them, or could not and said so); their memory goes back.
    release_locals();
    {
        std::lock_guard lock(mutex_);
        pending_.clear();
    }
    unwritten_.clear();
    unsynced_.clear();
    // Whoever still waits will not be answered (their clients are gone at
    // exit); run nothing.
    std::lock_guard lock(waiters_mutex_);
    waiters_.clear();
    waiters_.shrink_to_fit();
}

namespace {
thread_local bool t_wrote = false;
// The buffer this thread holds for its open data scope.
thread_local void* t_scope = nullptr;

// The buffer this thread claimed in the journal of serial `serial`.
struct ThreadBuffer {
    std::uint64_t serial = 0;
    void* buffer = nullptr;
};
thread_local ThreadBuffer t_buffer;

// A record body must stay below 2^31 bytes (proto/journal.md): keys are
// bounded by proto-max-bulk-len, but a record that would not fit is refused
// before anything changes rather than written with a wrapped length.
void check_body_size(std::size_t body_bytes) {
    if (body_bytes > jf::kMaxRecordBody) throw std::length_error("journal record too large");
}

// One record (u32 body length, type, body, XXH64) at `out`.
template <class Encode>
void encode_record_at(unsigned char* out, std::uint8_t type, std::size_t body_bytes,
                      Encode&& encode) {
    put_u32(out, static_cast<std::uint32_t>(body_bytes));
    out[4] = type;
    encode(out + 5);
    put_u64(out + 5 + body_bytes, XXH64(out, 5 + body_bytes, 0));
}

// A block holding one record.
template <class Encode>
store::EncodedRecord encode_block(std::uint8_t type, std::size_t body_bytes, Encode&& encode) {
    check_body_size(body_bytes);
    auto block = std::make_unique<store::RecordBlock>();
    block->bytes.resize(jf::kRecordOverhead + body_bytes);
    encode_record_at(reinterpret_cast<unsigned char*>(block->bytes.data()), type, body_bytes,
                     encode);
    return block;
}

unsigned char* put_bytes(unsigned char* out, std::string_view bytes) {
    put_u32(out, static_cast<std::uint32_t>(bytes.size()));
    if (!bytes.empty()) std::memcpy(out + 4, bytes.data(), bytes.size());
    return out + 4 + bytes.size();
}

}  // namespace

void Journal::reset_thread_mark() {
    t_wrote = false;
}

bool Journal::thread_mark() {
    return t_wrote;
}

Journal::LocalBuffer& Journal::local_buffer() {
    if (t_buffer.serial != serial_) {
        // Under mutex_: a cut() holds it while it locks every claimed buffer,
        // so no thread claims one halfway through a cut.
        std::lock_guard lock(mutex_);
        std::size_t index = locals_claimed_.load(std::memory_order_relaxed);
        if (index < kLocalBuffers) {
            locals_claimed_.store(index + 1, std::memory_order_release);
        } else {
            // Threads past kLocalBuffers share the last buffer.
            index = kLocalBuffers;
            locals_claimed_.store(kLocalBuffers + 1, std::memory_order_release);
        }
        t_buffer.serial = serial_;
        t_buffer.buffer = &locals_[index];
    }
    return *static_cast<LocalBuffer*>(t_buffer.buffer);
}

void Journal::appended_bytes(std::uint64_t bytes) noexcept {
    const std::uint64_t end = appended_.load(std::memory_order_relaxed) + bytes;
    appended_.store(end, std::memory_order_release);
    // The writer subtracts without the mutex: a read-modify-write.
    const std::uint64_t held = buffered_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    if (held > buffer_limit_ && !failing_.load(std::memory_order_relaxed)) {
        failing_.store(true, std::memory_order_relaxed);
    }
}

bool Journal::take_local(LocalBuffer& local) noexcept {
    if (local.block == nullptr || local.block->bytes.empty()) return false;
    const std::size_t bytes = local.block->bytes.size();
    // The block's memory, counted by the buffer, is counted by the stream
    // from here until the writer frees it.
    pending_.push(local.block);
    local.block = nullptr;
    local.charged = 0;
    local.size_hint = std::min<std::size_t>(bytes, 2 * kLocalFlushBytes);
    local.bytes.store(0, std::memory_order_relaxed);
    appended_bytes(bytes);
    return true;
}

bool Journal::take_all_locals() {
    bool any = false;
    const std::size_t claimed = locals_claimed_.load(std::memory_order_acquire);
    for (std::size_t i = 0; i < claimed; ++i) {
        LocalBuffer& local = locals_[i];
        // An open scope may hold records not counted yet: wait for it.
        if (!local.open.load(std::memory_order_seq_cst) &&
            local.bytes.load(std::memory_order_seq_cst) == 0) {
            continue;
        }
        std::lock_guard local_lock(local.mutex);
        any = take_local(local) || any;
    }
    return any;
}

bool Journal::locals_pending() const {
    const std::size_t claimed = locals_claimed_.load(std::memory_order_acquire);
    for (std::size_t i = 0; i < claimed; ++i) {
        if (locals_[i].bytes.load(std::memory_order_seq_cst) != 0) return true;
    }
    return false;
}

void Journal::wake_writer() {
    // Pairs with run(): the writer stores writer_idle_ = true and then reads
    // every buffer's bytes; this thread stored its bytes and then reads
    // writer_idle_ (all seq_cst). Either the writer sees the bytes and does
    // not sleep, or this thread sees it idle and wakes it. Under load the
    // writer never sleeps, so this is a plain load of a line nobody writes.
    if (!writer_idle_.load(std::memory_order_seq_cst)) return;
    bool wake;
    {
        std::lock_guard lock(mutex_);
        wake = claim_idle_writer();
    }
    if (wake) wake_.notify_one();
}

bool Journal::claim_idle_writer() {
    if (!writer_idle_.load(std::memory_order_relaxed)) return false;
    writer_idle_.store(false, std::memory_order_relaxed);
    return true;
}

void Journal::append_block(store::RecordBlock* block) noexcept {
    if (block == nullptr) return;
    LocalBuffer& local = local_buffer();
    std::int64_t capacity = 0;
    for (const store::RecordBlock* b = block; b != nullptr; b = b->next) {
        capacity += static_cast<std::int64_t>(b->bytes.capacity());
    }
    core::memory_add(core::MemoryUse::other, capacity);
    bool wake = false;
    {
        std::lock_guard lock(mutex_);
        // This thread's buffered records go first, so its own records keep
        // the order in which it made them.
        if (local.bytes.load(std::memory_order_relaxed) != 0) {
            std::lock_guard local_lock(local.mutex);
            take_local(local);
        }
        const std::uint64_t before = pending_.bytes;
        pending_.push(block);
        appended_bytes(pending_.bytes - before);
        wake = claim_idle_writer();
    }
    t_wrote = true;
    if (wake) wake_.notify_one();
}

void Journal::append(store::EncodedRecord record) noexcept {
    append_block(record.release());
}

store::EncodedRecord Journal::encode_created(std::string_view key,
                                             const bloom::ScalableFilter& filter,
                                             std::int64_t expire_at_ms) {
    const std::string header = bloom::encode_header(filter);
    return encode_block(jf::kCreate, 4 + key.size() + 8 + 8 + 4 + header.size(),
                        [&](unsigned char* out) {
                            out = put_bytes(out, key);
                            put_u64(out, static_cast<std::uint64_t>(expire_at_ms));
                            put_u64(out + 8, filter.id());
                            put_bytes(out + 16, header);
                        });
}

store::EncodedRecord Journal::encode_deleted(std::string_view key) {
    return encode_block(jf::kDelete, 4 + key.size(),
                        [&](unsigned char* out) { put_bytes(out, key); });
}

store::EncodedRecord Journal::encode_renamed(std::string_view from, std::string_view to) {
    return encode_block(jf::kRename, 8 + from.size() + to.size(),
                        [&](unsigned char* out) { put_bytes(put_bytes(out, from), to); });
}

store::EncodedRecord Journal::encode_expiry(std::string_view key, std::int64_t expire_at_ms) {
    return encode_block(jf::kExpire, 4 + key.size() + 8, [&](unsigned char* out) {
        put_u64(put_bytes(out, key), static_cast<std::uint64_t>(expire_at_ms));
    });
}

store::EncodedRecord Journal::encode_cleared() {
    return encode_block(jf::kFlushAll, 0, [](unsigned char*) {});
}

void Journal::ping() {
    append(encode_block(jf::kPing, 0, [](unsigned char*) {}));
}

void Journal::mark_open(LocalBuffer& local) {
    local.open.store(true, std::memory_order_seq_cst);
    // The scope's changes (bits set with relaxed atomics) come after this:
    // whoever sees one of them and then fences (position()) sees the scope
    // open, and takes its records once it closes.
    std::atomic_thread_fence(std::memory_order_release);
}

bloom::AddRecorder& Journal::begin_adds(const bloom::ScalableFilter& filter,
                                        std::size_t max_items) {
    if (max_items > bloom::ScalableFilter::kBatch) throw std::length_error("batch too large");
    LocalBuffer& local = local_buffer();
    std::unique_lock lock(local.mutex);
    // Room for the whole record first: once an add is recorded its bits are
    // set, so recording must not fail (no allocation after this).
    const std::size_t most = jf::kRecordOverhead + 12 + max_items * jf::kAddEntryBytes;
    local.reserve(most);
    std::string& out = local.block->bytes;
    local.record_start = out.size();
    // Sized for the whole batch now (within the capacity just reserved);
    // end_data() trims what the batch did not use.
    out.resize(local.record_start + most);
    auto* head = reinterpret_cast<unsigned char*>(out.data() + local.record_start);
    head[4] = jf::kAdd;
    put_u64(head + 5, filter.id());
    local.next_entry = head + 5 + 12;
    local.scope = LocalBuffer::Scope::adds;
    local.entries = 0;
    local.max_entries = static_cast<std::uint32_t>(max_items);
    mark_open(local);
    t_scope = &local;
    lock.release();  // held until end_data()
    return local;
}

void Journal::begin_chunk(const bloom::ScalableFilter& filter, std::int64_t iter,
                          std::string_view data) {
    const std::size_t body_bytes = 8 + 8 + 4 + data.size();
    check_body_size(body_bytes);
    LocalBuffer& local = local_buffer();
    std::unique_lock lock(local.mutex);
    local.reserve(jf::kRecordOverhead + body_bytes);
    std::string& out = local.block->bytes;
    const std::size_t at = out.size();
    out.resize(at + jf::kRecordOverhead + body_bytes);
    encode_record_at(reinterpret_cast<unsigned char*>(out.data() + at), jf::kChunk, body_bytes,
                     [&](unsigned char* body) {
                         put_u64(body, filter.id());
                         put_u64(body + 8, static_cast<std::uint64_t>(iter));
                         put_bytes(body + 16, data);
                     });
    local.scope = LocalBuffer::Scope::chunk;
    mark_open(local);
    t_scope = &local;
    lock.release();  // held until end_data()
}

void Journal::end_data() noexcept {
    auto* local = static_cast<LocalBuffer*>(t_scope);
    if (local == nullptr) return;
    t_scope = nullptr;
    std::string& out = local->block->bytes;
    bool wrote = true;
    if (local->scope == LocalBuffer::Scope::adds) {
        if (local->entries == 0) {
            out.resize(local->record_start);  // nothing was added: no record
            wrote = false;
        } else {
            auto* record = reinterpret_cast<unsigned char*>(out.data() + local->record_start);
            const std::size_t body_bytes = 12 + std::size_t{local->entries} * jf::kAddEntryBytes;
            put_u32(record, static_cast<std::uint32_t>(body_bytes));
            put_u32(record + 5 + 8, local->entries);
            put_u64(record + 5 + body_bytes, XXH64(record, 5 + body_bytes, 0));
            out.resize(local->record_start + jf::kRecordOverhead + body_bytes);
        }
    }
    local->scope = LocalBuffer::Scope::none;
    const std::size_t held = out.size();
    // Counted before the scope closes: a position() that finds the scope
    // closed finds its records counted.
    local->bytes.store(held, std::memory_order_seq_cst);
    local->open.store(false, std::memory_order_seq_cst);
    local->mutex.unlock();
    if (!wrote) return;
    t_wrote = true;
    if (held >= kLocalFlushBytes) {
        std::lock_guard lock(mutex_);
        std::lock_guard local_lock(local->mutex);
        take_local(*local);
    }
    wake_writer();
}

std::vector<Journal::SegmentFile> Journal::segment_files() const {
    std::lock_guard lock(mutex_);
    std::vector<SegmentFile> out;
    out.reserve(segments_.size());
    for (const Segment& segment : segments_) out.push_back({segment.start, segment.path});
    return out;
}

std::uint64_t Journal::position() {
    // Pairs with mark_open(): a caller that saw a bit of an add (a relaxed
    // load) and then asks for the position sees that add's scope open or its
    // records counted, and waits for them.
    std::atomic_thread_fence(std::memory_order_acquire);
    bool wake = false;
    {
        std::lock_guard lock(mutex_);
        wake = take_all_locals() && claim_idle_writer();
    }
    if (wake) wake_.notify_one();
    return appended();
}

std::uint64_t Journal::cut(const std::function<void()>& at_cut) {
    std::uint64_t at;
    bool wake = false;
    {
        std::unique_lock lock(mutex_);
        // Every claimed buffer locked at once (in index order, as nothing else
        // holds two): no data scope is open, none can open, and with mutex_
        // no keyspace record can be appended.
        const std::size_t claimed = locals_claimed_.load(std::memory_order_acquire);
        std::vector<std::unique_lock<std::mutex>> locals;
        locals.reserve(claimed);
        for (std::size_t i = 0; i < claimed; ++i) locals.emplace_back(locals_[i].mutex);
        bool took = false;
        for (std::size_t i = 0; i < claimed; ++i) took = take_local(locals_[i]) || took;
        at = appended();
        at_cut();
        wake = took && claim_idle_writer();
    }
    if (wake) wake_.notify_one();
    return at;
}

void Journal::when_durable(std::uint64_t id, std::uint64_t offset, std::function<void()> fn) {
    {
        std::lock_guard lock(waiters_mutex_);
        // Checked under the lock notify_durable() takes after advancing
        // durable_, so a waiter is either seen by it or sees the new value;
        // open() changes the id under it too.
        if (id == log_id() && durable() < offset) {
            waiters_.emplace_back(offset, std::move(fn));
            return;
        }
    }
    fn();
}

std::size_t Journal::notify_durable() {
    std::vector<std::function<void()>> ready;
    {
        std::lock_guard lock(waiters_mutex_);
        const std::uint64_t done = durable();
        auto keep = std::partition(waiters_.begin(), waiters_.end(),
                                   [done](const auto& w) { return w.first > done; });
        for (auto it = keep; it != waiters_.end(); ++it) ready.push_back(std::move(it->second));
        waiters_.erase(keep, waiters_.end());
    }
    for (auto& fn : ready) fn();
    return ready.size();
}

std::string Journal::failure() const {
    std::lock_guard lock(mutex_);
    if (!failure_.empty()) return failure_;
    if (failing_.load(std::memory_order_relaxed)) {
        return "journal buffer over " + std::to_string(buffer_limit_) +
               " bytes (the disk is slower than the writes)";
    }
    return {};
}

void Journal::set_failure(const std::string& what) {
    std::lock_guard lock(mutex_);
    if (failure_ != what) spdlog::error("journal: {}", what);
    failure_ = what;
    write_failed_ = true;
    failing_.store(true, std::memory_order_relaxed);
}

// Writes unwritten_ to the current segment (writev over its blocks); the
// blocks written move to unsynced_ with appendfsync always (kept until
// fdatasync succeeds) and are freed otherwise.
bool Journal::write_unwritten() {
    bool ok = true;
    std::uint64_t done = 0;
    while (!unwritten_.empty()) {
        // Up to 64 blocks per call; the first may be partly written already.
        iovec parts[64];
        int count = 0;
        std::size_t skip = unwritten_offset_;
        for (store::RecordBlock* b = unwritten_.head; b != nullptr && count < 64; b = b->next) {
            parts[count].iov_base = b->bytes.data() + skip;
            parts[count].iov_len = b->bytes.size() - skip;
            skip = 0;
            ++count;
        }
        const ssize_t n = ::writev(fd_, parts, count);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            set_failure("cannot write journal '" + current_path_ +
                        "': " + errno_text(n < 0 ? errno : ENOSPC));
            ok = false;
            break;
        }
        done += static_cast<std::uint64_t>(n);
        // Retire the blocks wholly written.
        auto left = static_cast<std::uint64_t>(n);
        while (left != 0) {
            store::RecordBlock* head = unwritten_.head;
            const std::uint64_t rest = head->bytes.size() - unwritten_offset_;
            if (left < rest) {
                unwritten_offset_ += left;
                break;
            }
            left -= rest;
            unwritten_offset_ = 0;
            unwritten_.head = head->next;
            if (unwritten_.head == nullptr) unwritten_.tail = nullptr;
            unwritten_.bytes -= head->bytes.size();
            head->next = nullptr;
            if (policy_ == FsyncPolicy::always) {
                unsynced_.push(head);
            } else {
                // everysec and no keep nothing once written: a failed
                // fdatasync can then lose up to a second of records (the
                // loss everysec accepts), and holding a second of records
                // would cost tens of megabytes.
                buffered_.fetch_sub(head->bytes.size(), std::memory_order_relaxed);
                BlockList gone;
                gone.push(head);
                gone.clear();
            }
        }
    }
    written_ += done;
    written_offset_.store(written_, std::memory_order_release);
    segment_size_ += done;
    file_bytes_.fetch_add(done, std::memory_order_relaxed);
    if (done != 0 && write_listener_) write_listener_(written_);
    if (policy_ == FsyncPolicy::no) durable_.store(written_, std::memory_order_release);
    return ok;
}

bool Journal::sync() {
    if (unsynced_.empty() && segment_size_ == synced_segment_size_) return true;
    syncing_.store(true, std::memory_order_relaxed);
    const std::int64_t began = steady_ms();
    const int rc = ::fdatasync(fd_);
    const int saved_errno = errno;
    const std::int64_t took = steady_ms() - began;
    syncing_.store(false, std::memory_order_relaxed);
    fsyncs_.fetch_add(1, std::memory_order_relaxed);
    last_fsync_ms_.store(took, std::memory_order_relaxed);
    if (took > 2000) {
        delayed_fsyncs_.fetch_add(1, std::memory_order_relaxed);
        spdlog::warn("journal: fdatasync took {} ms (the disk is busy)", took);
    }
    last_sync_ms_ = steady_ms();
    if (rc != 0) {
        // After a failed fdatasync the kernel may have dropped the dirty
        // pages. With appendfsync always, cut the file back to what is known
        // durable and write the rest again from memory (nobody was answered
        // yet); otherwise retry the fdatasync.
        set_failure("cannot fsync journal '" + current_path_ + "': " + errno_text(saved_errno));
        if (policy_ == FsyncPolicy::always &&
            ::ftruncate(fd_, static_cast<off_t>(synced_segment_size_)) == 0 &&
            ::lseek(fd_, 0, SEEK_END) >= 0) {
            file_bytes_.fetch_sub(segment_size_ - synced_segment_size_, std::memory_order_relaxed);
            // The same bytes are written again from memory: a replica that
            // read them meanwhile read what the file will hold again.
            written_ -= segment_size_ - synced_segment_size_;
            segment_size_ = synced_segment_size_;
            unsynced_.splice(unwritten_);
            std::swap(unwritten_, unsynced_);
            unwritten_offset_ = 0;
        }
        return false;
    }
    synced_segment_size_ = segment_size_;
    buffered_.fetch_sub(unsynced_.bytes, std::memory_order_relaxed);
    unsynced_.clear();
    durable_.store(written_, std::memory_order_release);
    last_fsync_unix_ms_.store(store::now_ms(), std::memory_order_relaxed);
    return true;
}

void Journal::run() {
    std::unique_lock lock(mutex_);
    std::size_t released = 0;  // replies the last fdatasync let go
    std::int64_t last_sync_us = 0;
    auto last_take = std::chrono::steady_clock::time_point{};  // threads' buffers last taken
    for (;;) {
        if (policy_ == FsyncPolicy::always && released > 1 && !stop_ && !rotate_requested_) {
            // Group commit: the clients just answered send their next
            // command within a round trip. Without waiting for them, each
            // fdatasync took only what arrived during the previous one and
            // every client waited two fdatasyncs per command (BF.ADD at -P 1
            // with 50 clients reached half of Redis's rate on the VM).
            const auto linger =
                std::chrono::microseconds(std::clamp<std::int64_t>(last_sync_us / 2, 100, 500));
            wake_.wait_for(lock, linger, [this] { return stop_ || rotate_requested_; });
        }
        const auto wanted = [this] {
            return stop_ || rotate_requested_ || !pending_.empty() || locals_pending();
        };
        if (policy_ != FsyncPolicy::always && !stop_ && !rotate_requested_) {
            // Threads' buffers are taken at most once a millisecond, so that
            // taking them (their mutexes) costs the adding threads nothing
            // measurable however fast the disk is.
            const auto since = std::chrono::steady_clock::now() - last_take;
            if (since < std::chrono::milliseconds(1)) {
                wake_.wait_for(lock, std::chrono::milliseconds(1) - since,
                               [this] { return stop_ || rotate_requested_; });
            }
        }
        if (!wanted()) {
            // everysec: wake for the once-a-second fdatasync; after a failure,
            // retry once a second.
            const bool timed =
                write_failed_ || (policy_ == FsyncPolicy::everysec &&
                                  (segment_size_ != synced_segment_size_ || !unwritten_.empty()));
            // Marked idle before wanted() reads the threads' buffers
            // (wake_writer()), again after every wake: whoever woke it
            // cleared the mark, and a wake that brought nothing must not
            // leave the writer asleep unmarked (nobody would wake it again).
            const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
            for (;;) {
                writer_idle_.store(true, std::memory_order_seq_cst);
                if (wanted()) break;
                if (!timed) {
                    wake_.wait(lock);
                } else if (wake_.wait_until(lock, until) == std::cv_status::timeout) {
                    break;
                }
            }
            writer_idle_.store(false, std::memory_order_relaxed);
            // everysec and no: linger up to 1 ms so one write() carries every
            // record appended meanwhile. Waking and writing per append
            // halved BF.ADD throughput at -P 16 on the 2-core VM (709k ->
            // 383k ops/s); always needs no linger: appends gather while the
            // previous fdatasync runs.
            if (policy_ != FsyncPolicy::always && !stop_ && !rotate_requested_) {
                wake_.wait_for(lock, std::chrono::milliseconds(1),
                               [this] { return stop_ || rotate_requested_; });
            }
        }
        const bool stopping = stop_;
        const bool rotating = rotate_requested_;
        take_all_locals();
        last_take = std::chrono::steady_clock::now();
        unwritten_.splice(pending_);
        lock.unlock();

        bool ok = write_unwritten();
        const bool sync_due =
            policy_ == FsyncPolicy::always || rotating || stopping ||
            (policy_ == FsyncPolicy::everysec && steady_ms() - last_sync_ms_ >= 1000);
        if (ok && sync_due) {
            const auto began = std::chrono::steady_clock::now();
            ok = sync();
            last_sync_us = std::chrono::duration_cast<std::chrono::microseconds>(
                               std::chrono::steady_clock::now() - began)
                               .count();
        }
        if (ok && rotating && segment_size_ > jf::kSegmentHeaderBytes) {
            std::string error;
            if (!open_segment(written_, error)) {
                spdlog::warn("journal: {}; going on in the current segment", error);
            }
        }
        if (ok && policy_ == FsyncPolicy::no && sync_due && rotating) {
            durable_.store(written_, std::memory_order_release);
        }
        released = notify_durable();

        lock.lock();
        if (ok && write_failed_) {
            spdlog::info("journal: writes succeed again");
            write_failed_ = false;
            failure_.clear();
        }
        if (!write_failed_) {
            failing_.store(buffered_.load(std::memory_order_relaxed) > buffer_limit_,
                           std::memory_order_relaxed);
        }
        if (rotating) {
            rotate_requested_ = false;
            rotated_to_ = segments_.back().start;
            ++rotations_done_;
            rotated_.notify_all();
        }
        if (stopping && pending_.empty() && !locals_pending() && (ok || unwritten_.empty())) break;
        if (stopping && !ok) {
            // Exiting with records that cannot be written: say so; they were
            // never acknowledged under appendfsync always.
            spdlog::error("journal: {} bytes could not be written at exit",
                          unwritten_.bytes + pending_.bytes);
            break;
        }
        if (!ok) {
            // Back off before retrying a failing disk.
            wake_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; });
        }
    }
}

std::uint64_t Journal::rotate() {
    std::unique_lock lock(mutex_);
    if (!writer_.joinable()) return appended();
    const std::uint64_t ticket = rotations_done_ + 1;
    rotate_requested_ = true;
    if (claim_idle_writer()) wake_.notify_one();
    rotated_.wait(lock, [&] { return rotations_done_ >= ticket || stop_; });
    return rotated_to_;
}

void Journal::drop_covered(std::uint64_t offset) {
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
        std::string error;
        if (!core::fsync_directory(dir_, error)) spdlog::warn("journal: {}", error);
        file_bytes_.fetch_sub(std::min(freed, file_bytes_.load()), std::memory_order_relaxed);
        spdlog::info("journal: removed {} segment(s) covered by the snapshot", doomed.size());
    }
    base_bytes_.store(file_bytes_.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

persist::JournalInfo Journal::info() const {
    persist::JournalInfo info;
    info.enabled = true;
    info.fsync_policy = fsync_policy_name(policy_);
    {
        std::lock_guard lock(mutex_);
        info.last_write_ok = !write_failed_;
        info.last_write_error = failure_;
        info.segments = segments_.size();
    }
    info.current_size = file_bytes_.load(std::memory_order_relaxed);
    info.base_size = base_bytes_.load(std::memory_order_relaxed);
    info.buffer_length = buffered_.load(std::memory_order_relaxed);
    const std::size_t claimed = locals_claimed_.load(std::memory_order_acquire);
    for (std::size_t i = 0; i < claimed; ++i) {
        info.buffer_length += locals_[i].bytes.load(std::memory_order_relaxed);
    }
    info.fsync_in_progress = syncing_.load(std::memory_order_relaxed);
    info.delayed_fsync = delayed_fsyncs_.load(std::memory_order_relaxed);
    info.fsyncs = fsyncs_.load(std::memory_order_relaxed);
    info.last_fsync_ms = last_fsync_ms_.load(std::memory_order_relaxed);
    info.last_fsync_unix_ms = last_fsync_unix_ms_.load(std::memory_order_relaxed);
    info.appended_offset = appended();
    info.durable_offset = durable();
    return info;
}

}  // namespace bloomery::persist
