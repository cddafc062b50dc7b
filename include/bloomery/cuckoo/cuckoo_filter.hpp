#pragma once
// A scalable Cuckoo filter that stores, grows, answers and dumps exactly as
// RedisBloom 2.4's CF.* type does, so a filter dumped by RedisBloom loads here
// unchanged, and one built here by the same operations holds the same bytes.
//
// Hashing: an item's hash is MurmurHash64A(item, seed 0). Its fingerprint is
//   hash mod 255 + 1 (never 0: 0 marks an empty slot); its two buckets in a
//   sub-filter of n buckets are h1 mod n and h2 mod n, h1 = hash and
//   h2 = h1 xor (fingerprint * 0x5bd1e995), both 64-bit.
// Layout: sub-filter i holds num_buckets * expansion^i buckets of
//   bucket_size one-byte slots, bucket b at bytes [b * bucket_size, ...).
//   num_buckets = next power of two >= capacity / bucket_size (at least 1);
//   expansion is rounded up to a power of two (0 stays 0: never grows).
// Insert: the first free slot of h1's then h2's bucket, newest sub-filter
//   first; else up to max_iterations relocations in the newest sub-filter
//   (the victim slot cycles 0, 1, ... through the buckets, undone if no slot
//   frees up); else a new sub-filter (expansion > 0) and a retry.
// Delete: the first slot holding the fingerprint, newest sub-filter first;
//   with more than one sub-filter, a delete that makes deletes exceed a tenth
//   of the items compacts (moves fingerprints into older sub-filters and
//   drops emptied newest ones).
//
// RedisBloom 2.4.23 chooses relocation victims deterministically (no
// randomness), so every operation here is a pure function of the filter's
// state. Inserts and deletes still report what they changed (InsertRecord,
// DeleteRecord) so that a journal can redo them with apply() without
// recomputing hashes or relocations.
//
// Thread safety: none inside. A filter may be read from several threads at
// once; any write (insert, remove, compact, apply, load_chunk) must be
// serialised with every other access by the caller, which holds one lock per
// filter for that.
//
// Memory: bytes() is what the filter holds; the caller reports it to the
// process's accounting (core/memory.hpp) and checks limits before growth
// through the max_bytes arguments below.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bloomery/core/result.hpp"

namespace bloomery::cuckoo {

// RedisBloom's bounds and defaults.
inline constexpr std::uint16_t kDefaultBucketSize = 2;
inline constexpr std::uint16_t kMaxBucketSize = 255;
inline constexpr std::uint16_t kDefaultMaxIterations = 20;
inline constexpr std::uint16_t kMaxIterations = 65535;
inline constexpr std::uint16_t kDefaultExpansion = 1;
inline constexpr std::uint16_t kMaxExpansion = 32768;
inline constexpr std::uint64_t kMaxNumBuckets = 0x00FFFFFFFFFFFFFFULL;
inline constexpr std::uint64_t kMaxFilters = 65535;
// CF.SCANDUMP: header bytes and the largest data chunk.
inline constexpr std::size_t kHeaderBytes = 38;
inline constexpr std::size_t kMaxChunkBytes = 16 * 1024 * 1024;
inline constexpr std::uint64_t kNoLimit = ~std::uint64_t{0};
// The most bytes() counts beyond the slots: the object and a table of
// kMaxFilters sub-filters. A loader that knows the slots' size allows this
// much more.
inline constexpr std::uint64_t kMaxBookkeepingBytes = std::uint64_t{4} << 20;

// The hash CF.* commands compute for an item.
std::uint64_t cuckoo_hash(std::string_view item);

struct CuckooParams {
    std::uint64_t capacity = 1024;
    std::uint16_t bucket_size = kDefaultBucketSize;
    std::uint16_t max_iterations = kDefaultMaxIterations;
    std::uint16_t expansion = kDefaultExpansion;
};

// One slot: a sub-filter and a byte offset into its data (bucket * bucket_size
// + slot index).
struct SlotRef {
    std::uint16_t filter = 0;
    std::uint64_t offset = 0;
    bool operator==(const SlotRef&) const = default;
};

// A fingerprint written into a slot; `from` is the slot it was pushed out of
// (meaningful for relocations only).
struct FingerprintMove {
    std::uint8_t fingerprint = 0;
    SlotRef from;
    SlotRef to;
    bool operator==(const FingerprintMove&) const = default;
};

enum class InsertStatus {
    inserted,    // stored
    exists,      // insert_unique: the fingerprint was already there
    no_space,    // full and not allowed to grow: "Filter is full"
    grow_failed  // a new sub-filter would pass a limit: "Memory allocation failure"
};

// What an insert did. Redone by apply(): grow to `filters` sub-filters, write
// `placed` (the new fingerprint's first slot), then each relocation in order.
struct InsertRecord {
    InsertStatus status = InsertStatus::no_space;
    std::uint16_t filters = 0;  // sub-filters after the insert
    std::uint8_t fingerprint = 0;
    SlotRef placed;
    std::vector<FingerprintMove> relocations;
};

// What a delete did: the slot it cleared and whether it then compacted.
struct DeleteRecord {
    bool deleted = false;
    SlotRef cleared;
    bool compacted = false;
};

// A CF.SCANDUMP answer: the next iterator (0 at the end) and the bytes (empty
// at the end, where RedisBloom answers a null).
struct DumpChunk {
    std::int64_t next = 0;
    std::string data;
};

class CuckooFilter {
public:
    // A new empty filter as CF.RESERVE makes it. Errors in RedisBloom's words;
    // parameter ranges are the caller's to check first (CF.RESERVE's texts).
    static core::Result<CuckooFilter> create(const CuckooParams& params,
                                             std::uint64_t max_bytes = kNoLimit);

    InsertRecord insert(std::uint64_t hash, std::uint64_t max_bytes = kNoLimit);
    // CF.ADDNX / CF.INSERTNX: `exists` when exists(hash), else insert().
    InsertRecord insert_unique(std::uint64_t hash, std::uint64_t max_bytes = kNoLimit);
    bool exists(std::uint64_t hash) const;
    std::uint64_t count(std::uint64_t hash) const;
    DeleteRecord remove(std::uint64_t hash);
    // CF.COMPACT is compact(true); a delete compacts with compact(false).
    void compact(bool keep_going);

    // Redo a recorded insert or delete on a filter in the state the original
    // was in. False (and nothing changed) if the record does not fit it.
    bool apply(const InsertRecord& record);
    bool apply(const DeleteRecord& record);

    // CF.SCANDUMP key pos (pos >= 0), chunks of at most `chunk_limit` bytes.
    DumpChunk scandump(std::int64_t pos, std::size_t chunk_limit = kMaxChunkBytes) const;
    std::string header() const;
    // CF.LOADCHUNK key 1 header: "Invalid header" for a wrong length,
    // "Couldn't create filter!" for a header RedisBloom refuses, one that
    // would need more than max_bytes, or one no RedisBloom filter can have.
    static core::Result<CuckooFilter> load_header(std::string_view blob, std::uint64_t max_bytes);
    // CF.LOADCHUNK key pos data (pos > 1): false for "Couldn't load chunk!".
    bool load_chunk(std::int64_t pos, std::string_view data);

    // CF.INFO.
    std::uint64_t info_size() const;  // RedisBloom's "Size"
    std::uint64_t num_buckets() const { return num_buckets_; }
    std::uint16_t num_filters() const { return static_cast<std::uint16_t>(filters_.size()); }
    std::uint64_t num_items() const { return num_items_; }
    std::uint64_t num_deletes() const { return num_deletes_; }
    std::uint16_t bucket_size() const { return bucket_size_; }
    std::uint16_t expansion() const { return expansion_; }
    std::uint16_t max_iterations() const { return max_iterations_; }
    // Slots over every sub-filter.
    std::uint64_t capacity() const;
    // Buckets of sub-filter i, and its bytes.
    std::uint64_t filter_buckets(std::uint16_t i) const { return filters_[i].num_buckets; }
    std::string_view filter_data(std::uint16_t i) const;

    // Bytes held (the slots, the sub-filter table and the object).
    std::uint64_t bytes() const;

private:
    struct SubFilter {
        std::uint64_t num_buckets = 0;
        std::vector<std::uint8_t> data;
    };
    struct Lookup {
        std::uint64_t h1 = 0;
        std::uint64_t h2 = 0;
        std::uint8_t fp = 0;
    };

    CuckooFilter() = default;
    static Lookup lookup(std::uint64_t hash);
    std::uint64_t index(const SubFilter& f, std::uint64_t hash) const;
    bool find_free(std::uint16_t i, const Lookup& key, SlotRef& out) const;
    bool grow(std::uint64_t max_bytes);
    bool sub_filter_buckets(std::size_t i, std::uint64_t& out) const;
    bool relocate(std::uint16_t i, std::uint64_t h1, InsertRecord& record);
    bool free_slot_in(std::uint16_t i, std::uint64_t bucket, SlotRef& out) const;
    int compact_one(std::uint16_t i);
    std::uint8_t& slot(const SlotRef& at) { return filters_[at.filter].data[at.offset]; }
    bool valid(const SlotRef& at) const;

    std::uint64_t num_buckets_ = 0;
    std::uint64_t num_items_ = 0;
    std::uint64_t num_deletes_ = 0;
    std::uint16_t bucket_size_ = 0;
    std::uint16_t max_iterations_ = 0;
    std::uint16_t expansion_ = 0;
    std::vector<SubFilter> filters_;
};

}  // namespace bloomery::cuckoo
