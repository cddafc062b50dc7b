#include "bloomery/bloom/filter.hpp"

#include "block_probing.hpp"
#include "bloomery/bloom/params.hpp"
#include "counter_slot.hpp"

#include <sys/mman.h>

#include <array>
#include <bit>
#include <cstring>
#include <new>

namespace bloomery::bloom {

namespace {

using WordRef = std::atomic_ref<std::uint64_t>;
static_assert(WordRef::required_alignment <= alignof(std::uint64_t),
              "inline words behind a layer must satisfy atomic_ref<uint64_t>");

// A mapped layer keeps kCounterSlots per-thread counter slots
// (counter_slot.hpp): 16 cache lines (1 KiB) beside at least 32 KiB of words.
constexpr std::size_t kPageBytes = 4096;
constexpr std::uint64_t kHugePageBytes = std::uint64_t{2} * 1024 * 1024;
// Layers with counters from this many bytes up get their own mapping.
constexpr std::uint64_t kOwnMappingBytes = std::uint64_t{1024} * 1024;

std::uint64_t round_to_pages(std::uint64_t bytes) {
    return (bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
}

bool is_mapped(const LayerGeometry& geometry) {
    return geometry.bits / 8 >= kMappedLayerBytes;
}

// A RedisBloom layer's bpe and n2, behind its words or its counters.
constexpr std::uint64_t kRedisBloomFieldsBytes = 16;
std::uint64_t fields_bytes(const LayerGeometry& geometry) {
    return geometry.scheme == HashScheme::redisbloom ? kRedisBloomFieldsBytes : 0;
}

// Words, then the counter slots (64-byte aligned: the words are whole pages
// or a multiple of 64 bytes once rounded), then a RedisBloom layer's fields,
// then the touched-regions bitmap.
std::uint64_t mapping_bytes(const LayerGeometry& geometry) {
    const std::uint64_t words_bytes = (geometry.bits / 8 + 63) / 64 * 64;
    return round_to_pages(words_bytes + kCounterSlots * 64 + fields_bytes(geometry) +
                          BloomLayer::summary_words(geometry.bits / 64) * 8);
}

}  // namespace

std::size_t BloomLayer::inline_bytes(const LayerGeometry& geometry) {
    return is_mapped(geometry)
               ? 0
               : static_cast<std::size_t>(geometry.bits / 8 + fields_bytes(geometry));
}

BloomLayer::BloomLayer(const LayerGeometry& geometry, std::uint64_t* inline_words)
    : capacity_(geometry.capacity),
      hashes_(geometry.hashes),
      mapped_(is_mapped(geometry) ? 1u : 0u),
      layout_(static_cast<std::uint8_t>(geometry.layout)),
      redisbloom_(geometry.scheme == HashScheme::redisbloom ? 1u : 0u),
      pow2_modulus_(geometry.scheme == HashScheme::redisbloom && geometry.redisbloom_n2 != 0 ? 1u
                                                                                             : 0u),
      error_rate_(geometry.error_rate),
      bits_(geometry.bits),
      taken_or_unclaimed_(is_mapped(geometry) ? geometry.capacity : 0),
      words_(inline_words) {
    if (mapped_ && mapping_bytes(geometry) < kOwnMappingBytes) {
        // From kMappedLayerBytes up to 1 MiB: from the allocator, which keeps such
        // blocks for reuse (a fresh mapping per layer costs far more to create
        // and free, mostly munmap's TLB shootdown; tests/bench/README.md).
        // Page-aligned like a mapping, so blocks sit on cache lines.
        void* p = ::operator new (mapping_bytes(geometry), std::align_val_t{kPageBytes});
        std::memset(p, 0, mapping_bytes(geometry));
        words_ = static_cast<std::uint64_t*>(p);
        new (counters()) Counter[kCounterSlots];
    } else if (mapped_) {
        // MAP_NORESERVE: a 1.2 GB filter (10^9 items at 1 %) costs RSS in
        // proportion to the bits set, and creating it is O(1) instead of
        // touching every page; munmap gives it all back at once on DEL.
        void* p = ::mmap(nullptr, mapping_bytes(geometry), PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) throw std::bad_alloc();
        // Transparent huge pages where the kernel allows them (Debian's
        // default is "madvise"): a lookup in a large filter then costs a
        // cache miss, not also a page-table walk (a 1 GiB filter spans 262k
        // 4 KiB pages, far beyond the TLB). Advisory: failure is harmless.
        if (mapping_bytes(geometry) >= kHugePageBytes)
            ::madvise(p, mapping_bytes(geometry), MADV_HUGEPAGE);
        words_ = static_cast<std::uint64_t*>(p);
        new (counters()) Counter[kCounterSlots];
    }
    if (redisbloom_) {
        new (redisbloom_fields()) RedisBloomFields{geometry.redisbloom_bpe, geometry.redisbloom_n2};
    }
}

LayerGeometry BloomLayer::geometry() const {
    LayerGeometry g{capacity_, error_rate_, bits_, static_cast<std::uint32_t>(hashes_), layout()};
    if (redisbloom_) {
        const RedisBloomFields* fields = redisbloom_fields();
        g.scheme = HashScheme::redisbloom;
        g.redisbloom_bpe = fields->bpe;
        g.redisbloom_n2 = fields->n2;
    }
    return g;
}

BloomLayer::RedisBloomFields* BloomLayer::redisbloom_fields() const {
    char* at = mapped_ ? reinterpret_cast<char*>(counters()) + kCounterSlots * sizeof(Counter)
                       : reinterpret_cast<char*>(words_) + bits_ / 8;
    return reinterpret_cast<RedisBloomFields*>(at);
}

std::uint64_t BloomLayer::redisbloom_modulus() const {
    return pow2_modulus_ ? std::uint64_t{1} << redisbloom_fields()->n2 : bits_;
}

BloomLayer::~BloomLayer() {
    if (!mapped_) return;
    if (mapped_bytes() < kOwnMappingBytes) {
        ::operator delete (words_, std::align_val_t{kPageBytes});
    } else {
        ::munmap(words_, mapped_bytes());
    }
}

std::uint64_t BloomLayer::mapped_bytes() const {
    return mapped_ ? mapping_bytes(geometry()) : 0;
}

BloomLayer::Counter* BloomLayer::counters() const {
    const std::uint64_t words_bytes = (bits_ / 8 + 63) / 64 * 64;
    return reinterpret_cast<Counter*>(reinterpret_cast<char*>(words_) + words_bytes);
}

std::uint64_t* BloomLayer::summary() const {
    char* at = reinterpret_cast<char*>(counters()) + kCounterSlots * sizeof(Counter) +
               (redisbloom_ ? kRedisBloomFieldsBytes : 0);
    return reinterpret_cast<std::uint64_t*>(at);
}

void BloomLayer::touch(std::uint64_t index) {
    if (!mapped_) return;
    const std::uint64_t region = index / kRegionWords;
    const std::uint64_t bit = std::uint64_t{1} << (region & 63);
    WordRef word(summary()[region / 64]);
    // Relaxed: the write of the data word that follows publishes it
    // (set_bit(), or the caller's own synchronization for loaders).
    if ((word.load(std::memory_order_relaxed) & bit) == 0) {
        word.fetch_or(bit, std::memory_order_relaxed);
    }
}

BloomLayer::Counter& BloomLayer::my_counter() const {
    return counters()[counter_slot()];
}

void BloomLayer::count_flipped(std::int64_t n) {
    if (!mapped_) return;  // small layers popcount when asked
    my_counter().flipped.fetch_add(n, std::memory_order_relaxed);
}

std::uint64_t BloomLayer::items() const {
    if (!mapped_) return taken_or_unclaimed_.load(std::memory_order_relaxed);
    std::uint64_t total = 0;
    const Counter* slots = counters();
    for (std::size_t i = 0; i < kCounterSlots; ++i) {
        total += slots[i].items.load(std::memory_order_relaxed);
    }
    return total;
}

void BloomLayer::set_items(std::uint64_t n) {
    if (!mapped_) {
        taken_or_unclaimed_.store(n, std::memory_order_relaxed);
        return;
    }
    Counter* slots = counters();
    for (std::size_t i = 0; i < kCounterSlots; ++i) {
        slots[i].items.store(i == 0 ? n : 0, std::memory_order_relaxed);
        slots[i].budget.store(0, std::memory_order_relaxed);
    }
    taken_or_unclaimed_.store(n >= capacity_ ? 0 : capacity_ - n, std::memory_order_relaxed);
    // A loaded layer (set_items() comes before its words) whose items hit
    // fewer than one 4 KiB page in 8 (a blocked item one page, a classic one
    // k) gets no huge pages: each page written would commit 2 MiB, so a
    // 2.6 GB layer of 1,000 items would take all of it (and the time to
    // clear it). Its untouched pages stay uncommitted.
    if (mapped_bytes() >= kHugePageBytes) {
        const bool blocks = layout_ != static_cast<std::uint8_t>(Layout::classic);
        if ((blocks ? n : n * hashes_) < num_words() / 512 / 8) {
            ::madvise(words_, mapped_bytes(), MADV_NOHUGEPAGE);
        }
    }
}

bool BloomLayer::reserve_item() {
    if (!mapped_) {
        // One shared count, exact: small layers are rarely hot, and a filter
        // this small fills (and grows past) them within microseconds.
        std::uint64_t taken = taken_or_unclaimed_.load(std::memory_order_relaxed);
        do {
            if (taken >= capacity_) return false;
        } while (!taken_or_unclaimed_.compare_exchange_weak(taken, taken + 1,
                                                            std::memory_order_relaxed));
        return true;
    }
    Counter& mine = my_counter();
    // Fast path: our own line only (shared with other threads only when more
    // than kCounterSlots threads add, which stays correct).
    std::uint64_t budget = mine.budget.load(std::memory_order_relaxed);
    while (budget != 0) {
        if (mine.budget.compare_exchange_weak(budget, budget - 1, std::memory_order_relaxed)) {
            return true;
        }
    }
    return reserve_from_chunk(mine) || reserve_from_others();
}

// Claims a chunk of the unclaimed room into `mine` and reserves one unit of
// it. Chunks are 1/32 of what is left (at most 4096, at least 1): big while
// the layer is empty, so the shared count is written once per thousands of
// items, and small near the end, so little room waits in idle slots.
bool BloomLayer::reserve_from_chunk(Counter& mine) {
    constexpr std::uint64_t kMaxChunk = 4096;
    std::uint64_t unclaimed = taken_or_unclaimed_.load(std::memory_order_relaxed);
    while (unclaimed != 0) {
        std::uint64_t chunk = unclaimed / (2 * kCounterSlots);
        chunk = chunk < 1 ? 1 : (chunk > kMaxChunk ? kMaxChunk : chunk);
        if (taken_or_unclaimed_.compare_exchange_weak(unclaimed, unclaimed - chunk,
                                                      std::memory_order_relaxed)) {
            if (chunk > 1) mine.budget.fetch_add(chunk - 1, std::memory_order_relaxed);
            return true;
        }
    }
    return false;
}

// Nothing left unclaimed: take one unit from any slot that still has some
// (only while a layer is within a few chunks of full).
bool BloomLayer::reserve_from_others() {
    Counter* slots = counters();
    for (std::size_t i = 0; i < kCounterSlots; ++i) {
        std::uint64_t budget = slots[i].budget.load(std::memory_order_relaxed);
        while (budget != 0) {
            if (slots[i].budget.compare_exchange_weak(budget, budget - 1,
                                                      std::memory_order_relaxed)) {
                return true;
            }
        }
    }
    return false;
}

void BloomLayer::commit_item() {
    if (mapped_) my_counter().items.fetch_add(1, std::memory_order_relaxed);
}

void BloomLayer::count_item() {
    if (!mapped_) {
        taken_or_unclaimed_.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    // Room from the unclaimed count or any slot's budget, so room() stays
    // capacity - items; an item beyond capacity (only a hostile record could
    // say so) is counted all the same.
    Counter& mine = my_counter();
    std::uint64_t unclaimed = taken_or_unclaimed_.load(std::memory_order_relaxed);
    bool taken = false;
    while (unclaimed != 0 && !taken) {
        taken = taken_or_unclaimed_.compare_exchange_weak(unclaimed, unclaimed - 1,
                                                          std::memory_order_relaxed);
    }
    if (!taken) reserve_from_others();
    mine.items.fetch_add(1, std::memory_order_relaxed);
}

void BloomLayer::uncount_item() {
    if (!mapped_) {
        std::uint64_t taken = taken_or_unclaimed_.load(std::memory_order_relaxed);
        while (taken != 0 && !taken_or_unclaimed_.compare_exchange_weak(
                                 taken, taken - 1, std::memory_order_relaxed)) {
        }
        return;
    }
    // Slots' item counts may wrap below 0 one by one; their sum is the
    // count. The room goes back to this slot's budget. Cells loaded with a
    // count of 0 (a chunk) give nothing back.
    if (items() == 0) return;
    Counter& mine = my_counter();
    mine.items.fetch_sub(1, std::memory_order_relaxed);
    mine.budget.fetch_add(1, std::memory_order_relaxed);
}

void BloomLayer::cancel_item() {
    if (!mapped_) {
        taken_or_unclaimed_.fetch_sub(1, std::memory_order_relaxed);
    } else {
        my_counter().budget.fetch_add(1, std::memory_order_relaxed);
    }
}

std::uint64_t BloomLayer::ones(std::uint64_t word) const {
    return static_cast<std::uint64_t>(counting() ? cells::count_nonzero(word)
                                                 : std::popcount(word));
}

std::uint64_t BloomLayer::block_start(const ItemHash& hash) const {
    return block_index(hash, bits_ / kBlockBits) * (kBlockBits / 64);
}

void BloomLayer::prefetch(const ItemHash& hash) const {
    if (layout_ == static_cast<std::uint8_t>(Layout::blocked) || counting()) {
        __builtin_prefetch(&words_[block_start(hash)]);
        return;
    }
    if (blocked_layout(layout())) {
        blocks::with_width(blocks::width_of(layout()),
                           [&]<unsigned W>(std::integral_constant<unsigned, W>) {
                               blocks::prefetch<W>(blocks::block_of<W>(words_, bits_, hash));
                           });
        return;
    }
    if (redisbloom_) {
        const std::uint64_t modulus = redisbloom_modulus();
        const std::uint32_t n = hashes_ < 4 ? hashes_ : 4;
        std::uint64_t x = hash.h1;
        for (std::uint32_t i = 0; i < n; ++i, x += hash.h2) {
            __builtin_prefetch(&words_[(x % modulus) >> 6]);
        }
        return;
    }
    // Classic: the first few probes (the rest are likely fetched by the time
    // they are needed, and a lookup of an absent item stops early).
    const std::uint32_t n = hashes_ < 4 ? hashes_ : 4;
    for (std::uint32_t i = 0; i < n; ++i) {
        __builtin_prefetch(&words_[probe_position(hash, i, bits_) >> 6]);
    }
}

namespace {

// Whether the k in-block probes of `hash` are all set in `block`. Stops at
// the first clear bit: a branch-free AND of all k was slower in batches, as
// the early exit lets the processor run ahead into the next items' loads.
inline bool block_holds(std::uint64_t* block, const ItemHash& hash, std::uint32_t k) {
    BlockProbes probes(hash);
    for (std::uint32_t i = 0; i < k; ++i) {
        const std::uint32_t pos = probes.next();
        if (((WordRef(block[pos >> 6]).load(std::memory_order_relaxed) >> (pos & 63)) & 1) == 0) {
            return false;
        }
    }
    return true;
}

// A counting layer's k cells of an item: indexes into its block, in probe
// order (a cell probed twice appears twice).
inline void cells_in_block(const ItemHash& hash, std::uint32_t k, std::uint32_t* out) {
    BlockProbes probes(hash);
    for (std::uint32_t i = 0; i < k; ++i) out[i] = probes.next() % kBlockCells;
}

inline std::uint64_t load(std::uint64_t* block, std::uint32_t cell) {
    return WordRef(block[cell / kCellsPerWord]).load(std::memory_order_relaxed);
}

inline bool cells_nonzero(std::uint64_t* block, const ItemHash& hash, std::uint32_t k) {
    std::uint32_t at[kMaxHashes];
    cells_in_block(hash, k, at);
    for (std::uint32_t i = 0; i < k; ++i) {
        if (cells::get(load(block, at[i]), at[i]) == 0) return false;
    }
    return true;
}

// Adds `step` (+1 or -1) to each of the k cells, 15 staying and 0 staying
// for a decrement; returns how many cells went from 0 (+1) or to 0 (-1).
inline std::int64_t step_cells(std::uint64_t* block, const ItemHash& hash, std::uint32_t k,
                               int step) {
    std::uint32_t at[kMaxHashes];
    cells_in_block(hash, k, at);
    std::int64_t changed = 0;
    for (std::uint32_t i = 0; i < k; ++i) {
        WordRef word(block[at[i] / kCellsPerWord]);
        const std::uint64_t value = word.load(std::memory_order_relaxed);
        const std::uint32_t cell = cells::get(value, at[i]);
        if (cell == kCellMax || (step < 0 && cell == 0)) continue;
        const std::uint32_t next = step > 0 ? cell + 1 : cell - 1;
        word.store(cells::with(value, at[i], next), std::memory_order_relaxed);
        changed += (step > 0 ? cell == 0 : next == 0) ? 1 : 0;
    }
    return changed;
}

}  // namespace

inline std::int64_t BloomLayer::set_bit(std::uint64_t pos) {
    const std::uint64_t index = pos >> 6;
    const std::uint64_t mask = std::uint64_t{1} << (pos & 63);
    WordRef word(words_[index]);
    // Read before writing: re-adding a present item (common for crawlers)
    // then never dirties a shared cache line, as in RocksDB's DynamicBloom.
    const std::uint64_t seen = word.load(std::memory_order_acquire);
    if ((seen & mask) != 0) return 0;
    // The region is marked touched before the word can become non-zero, by
    // whichever adder saw it zero. An adder that sees it non-zero read (with
    // acquire) a fetch_or that released the mark, so every add that has
    // returned has its word's region marked where any later reader looks:
    // a DUMP after the reply, or a snapshot after its cut (which waits for
    // the add's journal scope to close, and so also orders the mark before
    // the snapshot's reads). On x86 the orderings cost no instruction.
    if (seen == 0) touch(index);
    // Only the thread that flipped the bit counts it, so the counters sum to
    // the exact popcount once concurrent adds finish.
    return (word.fetch_or(mask, std::memory_order_acq_rel) & mask) == 0 ? 1 : 0;
}

bool BloomLayer::remove(const ItemHash& hash) {
    std::uint64_t* block = words_ + block_start(hash);
    if (!counting() || !cells_nonzero(block, hash, hashes_)) return false;
    const std::int64_t cleared = step_cells(block, hash, hashes_, -1);
    if (cleared != 0) count_flipped(-cleared);
    return true;
}

bool BloomLayer::add(const ItemHash& hash) {
    std::int64_t flipped = 0;
    if (counting()) {
        // One block: its region is marked before any of its cells goes up
        // (a write from one thread at a time).
        const std::uint64_t start = block_start(hash);
        touch(start);
        flipped = step_cells(words_ + start, hash, hashes_, +1);
    } else if (layout_ == static_cast<std::uint8_t>(Layout::blocked)) {
        const std::uint64_t block_bit = block_start(hash) * 64;
        BlockProbes probes(hash);
        for (std::uint32_t i = 0; i < hashes_; ++i) flipped += set_bit(block_bit + probes.next());
    } else if (blocked_layout(layout())) {
        flipped = blocks::with_width(
            blocks::width_of(layout()), [&]<unsigned W>(std::integral_constant<unsigned, W>) {
                std::uint64_t* block = blocks::block_of<W>(words_, bits_, hash);
                const auto block_bit = static_cast<std::uint64_t>(block - words_) * 64;
                return blocks::add<W>(block, hash, hashes_,
                                      [this, block_bit](std::uint64_t*, std::uint32_t pos) {
                                          return set_bit(block_bit + pos);
                                      });
            });
    } else if (redisbloom_) {
        // RedisBloom's probes: (a + i·b) mod 2^64, then mod M.
        const std::uint64_t modulus = redisbloom_modulus();
        std::uint64_t x = hash.h1;
        for (std::uint32_t i = 0; i < hashes_; ++i, x += hash.h2) {
            flipped += set_bit(x % modulus);
        }
    } else {
        ClassicProbes probes(hash, bits_);
        for (std::uint32_t i = 0; i < hashes_; ++i) flipped += set_bit(probes.next());
    }
    if (flipped != 0) count_flipped(flipped);
    return flipped != 0;
}

bool BloomLayer::contains(const ItemHash& hash) const {
    if (counting()) return cells_nonzero(words_ + block_start(hash), hash, hashes_);
    if (layout_ == static_cast<std::uint8_t>(Layout::blocked)) {
        // Every probe in one cache line: one miss, then register work.
        return block_holds(words_ + block_start(hash), hash, hashes_);
    }
    if (blocked_layout(layout())) {
        return blocks::with_width(
            blocks::width_of(layout()), [&]<unsigned W>(std::integral_constant<unsigned, W>) {
                return blocks::holds<W>(blocks::block_of<W>(words_, bits_, hash), hash, hashes_);
            });
    }
    if (redisbloom_) {
        const std::uint64_t modulus = redisbloom_modulus();
        std::uint64_t x = hash.h1;
        for (std::uint32_t i = 0; i < hashes_; ++i, x += hash.h2) {
            const std::uint64_t pos = x % modulus;
            if ((WordRef(words_[pos >> 6]).load(std::memory_order_relaxed) &
                 (std::uint64_t{1} << (pos & 63))) == 0) {
                return false;
            }
        }
        return true;
    }
    ClassicProbes probes(hash, bits_);
    for (std::uint32_t i = 0; i < hashes_; ++i) {
        const std::uint64_t pos = probes.next();
        const std::uint64_t mask = std::uint64_t{1} << (pos & 63);
        if ((WordRef(words_[pos >> 6]).load(std::memory_order_relaxed) & mask) == 0) return false;
    }
    return true;
}

void BloomLayer::contains_blocked(const ItemHash* hashes, std::size_t n,
                                  std::uint8_t* found) const {
    blocks::with_width(blocks::width_of(layout()),
                       [&]<unsigned W>(std::integral_constant<unsigned, W>) {
                           blocks::contains_batch<W>(words_, bits_, hashes_, hashes, n, found);
                       });
}

std::uint64_t BloomLayer::set_bits() const {
    if (!mapped_) {
        // Fewer than kMappedLayerBytes / 8 = 8192 words; a default filter
        // has 18. Cheaper than counting on every add.
        std::uint64_t total = 0;
        for (std::uint64_t i = 0; i < num_words(); ++i) total += ones(load_word(i));
        return total;
    }
    std::int64_t total = 0;
    const Counter* slots = counters();
    for (std::size_t i = 0; i < kCounterSlots; ++i) {
        total += slots[i].flipped.load(std::memory_order_relaxed);
    }
    // A slot can be transiently negative while store_words() races with
    // add(); the sum of a quiescent layer is exact and never negative.
    return total < 0 ? 0 : static_cast<std::uint64_t>(total);
}

void LayerDeleter::operator()(BloomLayer* layer) const {
    layer->~BloomLayer();
    ::operator delete(layer);
}

LayerPtr make_layer(const LayerGeometry& geometry) {
    const std::size_t extra = BloomLayer::inline_bytes(geometry);
    void* block = ::operator new(sizeof(BloomLayer) + extra);
    std::uint64_t* words = nullptr;
    if (!is_mapped(geometry)) {
        words = reinterpret_cast<std::uint64_t*>(static_cast<char*>(block) + sizeof(BloomLayer));
        std::memset(words, 0, extra);
    }
    try {
        return LayerPtr(new (block) BloomLayer(geometry, words));
    } catch (...) {
        ::operator delete(block);
        throw;
    }
}

std::uint64_t layer_allocation_bytes(const LayerGeometry& geometry) {
    const std::uint64_t block = sizeof(BloomLayer) + BloomLayer::inline_bytes(geometry);
    return block + (is_mapped(geometry) ? mapping_bytes(geometry) : 0);
}

}  // namespace bloomery::bloom
