#include "bloomery/bloom/age_filter.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <new>

#include "bloomery/bloom/params.hpp"
#include "bloomery/bloom/scalable_filter.hpp"
#include "counter_slot.hpp"
#include "little_endian.hpp"

namespace bloomery::bloom {

namespace {

using WordRef = std::atomic_ref<std::uint64_t>;

// Per-thread slots: as a large plain layer's counters (counter_slot.hpp).
constexpr std::size_t kSlots = kCounterSlots;
constexpr std::uint64_t kPageBytes = 4096;
constexpr std::uint64_t kHugePageBytes = std::uint64_t{2} * 1024 * 1024;
// Slice arrays from this size up get an anonymous mapping of their own
// (pages committed when first written); smaller ones come from the allocator.
constexpr std::uint64_t kOwnMappingBytes = std::uint64_t{1024} * 1024;

// Room (the generation's, and each slot's budget) is one word: the low 24
// bits of the generation it belongs to, and 40 bits of items.
constexpr unsigned kRoomBits = 40;
constexpr std::uint64_t kRoomMask = (std::uint64_t{1} << kRoomBits) - 1;
constexpr std::uint64_t kTagMask = (std::uint64_t{1} << 24) - 1;
std::uint64_t room_word(std::uint64_t generation, std::uint64_t items) {
    return ((generation & kTagMask) << kRoomBits) | items;
}
bool room_of(std::uint64_t word, std::uint64_t generation) {
    return (word >> kRoomBits) == (generation & kTagMask) && (word & kRoomMask) != 0;
}

std::uint64_t words_bytes(const AgeGeometry& geometry) {
    return geometry.slices() * (geometry.slice_bits / 8);
}

bool own_mapping(const AgeGeometry& geometry) {
    return words_bytes(geometry) >= kOwnMappingBytes;
}

std::uint64_t rounded_words_bytes(const AgeGeometry& geometry) {
    const std::uint64_t bytes = words_bytes(geometry);
    return own_mapping(geometry) ? (bytes + kPageBytes - 1) / kPageBytes * kPageBytes
                                 : (bytes + 63) / 64 * 64;
}

// Items a slot claims from the generation's room at once: one shared write
// per chunk, and at most a sixteenth of the generation held per slot.
std::uint64_t chunk_items(std::uint64_t generation_items) {
    return std::clamp<std::uint64_t>(generation_items / (4 * kSlots), 1, 4096);
}

constexpr std::uint32_t kBlockWords = kAgeBlockBits / 64;
// An item's bit in a block: the top log2(kAgeBlockBits) bits of a product.
constexpr unsigned kBlockShift = 64 - std::countr_zero(kAgeBlockBits);

// Slice s's multiplier: SplitMix64's output for s, made odd. An item's bit
// in slice s's block is the top 9 bits of h2 times it (multiply-shift, a
// universal family: with independent multipliers, two items meet in one
// slice independently of the others). A single multiplier for all slices,
// with the slice added to h2, would not do: the top bits of (h2 + c_s)·C
// are those of h2·C shifted by about the same amount for every item, so
// slices would repeat one another's patterns.
std::uint64_t slice_multiplier(std::uint32_t slice) {
    std::uint64_t z = (std::uint64_t{slice} + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (z ^ (z >> 31)) | 1;
}

}  // namespace

std::optional<AgeGeometry> age_geometry(double error_rate, std::uint64_t capacity,
                                        std::uint64_t window_ms, std::optional<AgeShape> shape) {
    if (!shape) shape = choose_age_shape(error_rate);
    if (!shape || shape->l == 0 || capacity == 0) return std::nullopt;
    AgeGeometry geometry;
    geometry.shape = *shape;
    geometry.generation_items = (capacity + shape->l - 1) / shape->l;
    const double scale = age_slice_scale(*shape, error_rate);
    if (scale == 0.0) return std::nullopt;
    geometry.slice_bits = age_slice_bits(*shape, geometry.generation_items, scale);
    geometry.error_rate = error_rate;
    geometry.window_ms = window_ms;
    if (!check_age_geometry(geometry).empty()) return std::nullopt;
    return geometry;
}

std::string_view check_age_geometry(const AgeGeometry& geometry) {
    const AgeShape shape = geometry.shape;
    if (shape.k == 0 || shape.k > kMaxAgeK || shape.l == 0 || shape.l > kMaxAgeL) {
        return "slices out of range";
    }
    if (!(geometry.error_rate > 0.0 && geometry.error_rate < 1.0)) return "error rate out of range";
    if (geometry.generation_items == 0 || geometry.generation_items > kRoomMask) {
        return "generation size out of range";
    }
    if (geometry.slice_bits == 0 || geometry.slice_bits % kAgeBlockBits != 0) {
        return "slice size invalid";
    }
    if (geometry.slice_bits > kMaxAgeBits / geometry.slices()) return "filter too large";
    if (geometry.window_ms != 0 && geometry.window_ms < shape.l) return "window too short";
    return {};
}

AgeFilterRef AgeFilter::create(const AgeGeometry& geometry, std::uint64_t generation,
                               std::uint64_t shifted_ms) {
    return AgeFilterRef(new AgeFilter(geometry, generation, shifted_ms));
}

AgeFilter::AgeFilter(const AgeGeometry& geometry, std::uint64_t generation,
                     std::uint64_t shifted_ms)
    : geometry_(geometry),
      generation_(generation),
      shifted_ms_(shifted_ms),
      room_(room_word(generation, geometry.generation_items)),
      mapped_(own_mapping(geometry)),
      charge_(core::MemoryUse::filters) {
    // Ids are shared by every kind of filter (journal records name them).
    id_ = ScalableFilter::next_id();
    const std::uint64_t bytes = rounded_words_bytes(geometry);
    if (mapped_) {
        void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) throw std::bad_alloc();
        if (bytes >= kHugePageBytes) ::madvise(p, bytes, MADV_HUGEPAGE);
        words_ = static_cast<std::uint64_t*>(p);
    } else {
        words_ = static_cast<std::uint64_t*>(::operator new (bytes, std::align_val_t{64}));
        std::fill_n(words_, bytes / 8, std::uint64_t{0});
    }
    slots_ = new Slot[kSlots];
    counts_ = new std::atomic<std::uint64_t>[slices()];
    multipliers_ = new std::uint64_t[slices()];
    for (std::uint32_t s = 0; s < slices(); ++s) multipliers_[s] = slice_multiplier(s);
    for (std::uint32_t s = 0; s < slices(); ++s) counts_[s].store(0, std::memory_order_relaxed);
    charge_.set(allocated_bytes());
}

AgeFilter::~AgeFilter() {
    if (mapped_) {
        ::munmap(words_, rounded_words_bytes(geometry_));
    } else {
        ::operator delete (words_, std::align_val_t{64});
    }
    delete[] slots_;
    delete[] counts_;
    delete[] multipliers_;
}

void AgeFilter::release() const {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

std::uint64_t AgeFilter::allocated_bytes() const {
    return sizeof(AgeFilter) + rounded_words_bytes(geometry_) + kSlots * sizeof(Slot) +
           std::uint64_t{2} * slices() * sizeof(std::uint64_t);
}

std::uint64_t* AgeFilter::group(const ItemHash& hash) const {
    return words_ + word_index(block_index(hash, blocks()), 0, 0);
}

bool AgeFilter::bit(const std::uint64_t* group, std::uint32_t slice, const ItemHash& hash) const {
    const auto pos = static_cast<std::uint32_t>((hash.h2 * multipliers_[slice]) >> kBlockShift);
    const std::uint64_t* word = group + std::size_t{slice} * kBlockWords + pos / 64;
    const std::uint64_t value =
        WordRef(*const_cast<std::uint64_t*>(word)).load(std::memory_order_relaxed);
    return (value >> (pos % 64) & 1) != 0;
}

void AgeFilter::set_bit(std::uint64_t* group, std::uint32_t slice, const ItemHash& hash) const {
    const auto pos = static_cast<std::uint32_t>((hash.h2 * multipliers_[slice]) >> kBlockShift);
    WordRef word(group[std::size_t{slice} * kBlockWords + pos / 64]);
    const std::uint64_t mask = std::uint64_t{1} << (pos % 64);
    if ((word.load(std::memory_order_relaxed) & mask) == 0) {
        word.fetch_or(mask, std::memory_order_relaxed);
    }
}

// Some k positions in a row hold the item's bits. Every such run holds one
// of the positions k − 1, 2k − 1, ... ("checkpoints"), so the search loads
// those first, 64 at a time and independently of one another (their misses
// overlap), then looks around each one found set, only as far as a run
// through it could reach.
bool AgeFilter::found(std::uint64_t generation, const ItemHash& hash) const {
    const std::int64_t k = geometry_.shape.k;
    const std::int64_t n = slices();
    const std::int64_t newest = physical(generation);
    const std::uint64_t* lines = group(hash);
    const auto at = [&](std::int64_t p) {
        const std::int64_t s = newest >= p ? newest - p : newest + n - p;
        return bit(lines, static_cast<std::uint32_t>(s), hash);
    };
    for (std::int64_t first = k - 1; first < n; first += 64 * k) {
        const std::int64_t count = std::min<std::int64_t>(64, (n - 1 - first) / k + 1);
        std::uint64_t set = 0;
        for (std::int64_t j = 0; j < count; ++j) {
            set |= static_cast<std::uint64_t>(at(first + j * k)) << j;
        }
        for (; set != 0; set &= set - 1) {
            const std::int64_t p = first + std::countr_zero(set) * k;
            std::int64_t run = 1;
            for (std::int64_t b = p - 1; b > p - k && at(b); --b) ++run;
            for (std::int64_t f = p + 1; run < k && f < n && f < p + k && at(f); ++f) ++run;
            if (run >= k) return true;
        }
    }
    return false;
}

bool AgeFilter::contains(const ItemHash& hash) const {
    return found(generation(), hash);
}

void AgeFilter::contains_many(const ItemHash* hashes, std::size_t n, std::uint8_t* out) const {
    constexpr std::size_t kAhead = 8;
    const std::uint64_t g = generation();
    // The lines of the newest slice and of the k-th: a recent item's run
    // lies between them, and a search starts at the k-th.
    const std::uint32_t newest = physical(g);
    const std::uint32_t kth = physical(g + slices() - (geometry_.shape.k - 1));
    const auto prefetch = [&](const ItemHash& hash) {
        const std::uint64_t* lines = group(hash);
        __builtin_prefetch(lines + std::size_t{newest} * kBlockWords);
        __builtin_prefetch(lines + std::size_t{kth} * kBlockWords);
    };
    for (std::size_t i = 0; i < n && i < kAhead; ++i) prefetch(hashes[i]);
    for (std::size_t i = 0; i < n; ++i) {
        if (i + kAhead < n) prefetch(hashes[i + kAhead]);
        out[i] = found(g, hashes[i]) ? 1 : 0;
    }
}

bool AgeFilter::newest_hold(std::uint64_t generation, const ItemHash& hash) const {
    const std::uint64_t* lines = group(hash);
    for (std::uint32_t p = 0; p < geometry_.shape.k; ++p) {
        if (!bit(lines, physical(generation + slices() - p), hash)) return false;
    }
    return true;
}

AgeFilter::Added AgeFilter::add(const ItemHash& hash, AgeRecorder* recorder, bool* full) {
    const std::uint64_t g = generation();
    if (newest_hold(g, hash)) return Added::exists;
    const bool held = found(g, hash);
    const bool room = take_room(g);
    // Full when no room was left, or this add took the last of it: the
    // shift then comes as the generation reaches g items, not one later.
    if (full != nullptr && (!room || took_last_room(g))) *full = true;
    if (recorder != nullptr && !recorder->record(g, hash)) {
        if (room) give_back_room(g);
        return Added::not_recorded;
    }
    std::uint64_t* lines = group(hash);
    for (std::uint32_t p = 0; p < geometry_.shape.k; ++p) {
        set_bit(lines, physical(g + slices() - p), hash);
    }
    slots_[counter_slot()].count[g & 1].fetch_add(1, std::memory_order_relaxed);
    return held ? Added::exists : Added::added;
}

bool AgeFilter::take_room(std::uint64_t generation) {
    const std::size_t mine = counter_slot();
    std::atomic<std::uint64_t>& budget = slots_[mine].budget;
    std::uint64_t held = budget.load(std::memory_order_relaxed);
    while (room_of(held, generation)) {
        if (budget.compare_exchange_weak(held, held - 1, std::memory_order_relaxed)) return true;
    }
    std::uint64_t left = room_.load(std::memory_order_relaxed);
    while (room_of(left, generation)) {
        const std::uint64_t take =
            std::min(chunk_items(geometry_.generation_items), left & kRoomMask);
        if (!room_.compare_exchange_weak(left, left - take, std::memory_order_relaxed)) continue;
        // One item now, the rest into this slot's budget (a stale budget,
        // another generation's, is dropped).
        held = budget.load(std::memory_order_relaxed);
        for (;;) {
            const std::uint64_t next =
                room_of(held, generation) ? held + (take - 1) : room_word(generation, take - 1);
            if (budget.compare_exchange_weak(held, next, std::memory_order_relaxed)) return true;
        }
    }
    return take_from_others(generation, mine);
}

bool AgeFilter::take_from_others(std::uint64_t generation, std::size_t mine) {
    for (std::size_t i = 1; i < kSlots; ++i) {
        std::atomic<std::uint64_t>& budget = slots_[(mine + i) % kSlots].budget;
        std::uint64_t held = budget.load(std::memory_order_relaxed);
        while (room_of(held, generation)) {
            if (budget.compare_exchange_weak(held, held - 1, std::memory_order_relaxed)) {
                return true;
            }
        }
    }
    return false;
}

void AgeFilter::give_back_room(std::uint64_t generation) {
    std::atomic<std::uint64_t>& budget = slots_[counter_slot()].budget;
    std::uint64_t held = budget.load(std::memory_order_relaxed);
    for (;;) {
        const std::uint64_t next =
            (held >> kRoomBits) == (generation & kTagMask) ? held + 1 : room_word(generation, 1);
        if (budget.compare_exchange_weak(held, next, std::memory_order_relaxed)) return;
    }
}

bool AgeFilter::took_last_room(std::uint64_t generation) const {
    // Only once this thread's budget and the shared room are both spent
    // are the other slots looked at (once per chunk of room).
    if (room_of(slots_[counter_slot()].budget.load(std::memory_order_relaxed), generation) ||
        room_of(room_.load(std::memory_order_relaxed), generation)) {
        return false;
    }
    return shift_wanted();
}

bool AgeFilter::shift_wanted() const {
    const std::uint64_t g = generation();
    if (room_of(room_.load(std::memory_order_relaxed), g)) return false;
    for (std::size_t i = 0; i < kSlots; ++i) {
        if (room_of(slots_[i].budget.load(std::memory_order_relaxed), g)) return false;
    }
    return true;
}

// Words already zero are left alone: a block no item reached is read, not
// written, so a large filter's untouched pages stay uncommitted.
void AgeFilter::clear_slice(std::uint32_t slice) {
    for (std::uint64_t b = 0; b < blocks(); ++b) {
        std::uint64_t* line = words_ + word_index(b, slice, 0);
        for (std::uint32_t i = 0; i < kBlockWords; ++i) {
            WordRef word(line[i]);
            if (word.load(std::memory_order_relaxed) != 0) word.store(0, std::memory_order_relaxed);
        }
    }
}

void AgeFilter::clear_all() {
    if (mapped_) {
        // Pages handed back read as zeros again (and cost nothing until
        // written); only the thread that alone changes the filter calls this.
        ::madvise(words_, rounded_words_bytes(geometry_), MADV_DONTNEED);
        return;
    }
    std::fill_n(words_, rounded_words_bytes(geometry_) / 8, std::uint64_t{0});
}

void AgeFilter::file_counts(std::uint64_t generation) {
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < kSlots; ++i) {
        total += slots_[i].count[generation & 1].exchange(0, std::memory_order_relaxed);
    }
    counts_[physical(generation)].fetch_add(total, std::memory_order_relaxed);
}

void AgeFilter::shift(std::uint64_t now_ms) {
    const std::uint64_t g = generation_.load(std::memory_order_relaxed);
    // Every add stamped g − 1 has finished (the precondition): file its
    // count, freeing its parity for g + 1.
    if (g > 0) file_counts(g - 1);
    const std::uint32_t recycled = physical(g + 1);
    clear_slice(recycled);
    counts_[recycled].store(0, std::memory_order_relaxed);
    room_.store(room_word(g + 1, geometry_.generation_items), std::memory_order_relaxed);
    shifted_ms_.store(now_ms, std::memory_order_relaxed);
    // Release: an add that reads g + 1 sees the slice cleared.
    generation_.store(g + 1, std::memory_order_release);
}

void AgeFilter::advance_to(std::uint64_t generation, std::uint64_t shifted_ms) {
    const std::uint64_t g = generation_.load(std::memory_order_relaxed);
    if (generation < g) return;
    if (generation == g) {
        // The shift's own record, after an add stamped with its generation
        // made the step: it brings the time.
        shifted_ms_.store(shifted_ms, std::memory_order_relaxed);
        return;
    }
    if (generation - g < slices()) {
        while (generation_.load(std::memory_order_relaxed) < generation) shift(shifted_ms);
        return;
    }
    // A window or more ahead: nothing now held stays live.
    clear_all();
    for (std::uint32_t s = 0; s < slices(); ++s) counts_[s].store(0, std::memory_order_relaxed);
    for (std::size_t i = 0; i < kSlots; ++i) {
        slots_[i].count[0].store(0, std::memory_order_relaxed);
        slots_[i].count[1].store(0, std::memory_order_relaxed);
    }
    room_.store(room_word(generation, geometry_.generation_items), std::memory_order_relaxed);
    shifted_ms_.store(shifted_ms, std::memory_order_relaxed);
    generation_.store(generation, std::memory_order_release);
}

void AgeFilter::count_item(std::uint64_t generation) {
    const std::uint64_t g = generation_.load(std::memory_order_relaxed);
    if (generation + 1 >= g) {
        slots_[counter_slot()].count[generation & 1].fetch_add(1, std::memory_order_relaxed);
    } else {
        counts_[physical(generation)].fetch_add(1, std::memory_order_relaxed);
    }
    // The room it took, so a server promoted after replay shifts on time.
    std::uint64_t left = room_.load(std::memory_order_relaxed);
    while (generation == g && room_of(left, g) &&
           !room_.compare_exchange_weak(left, left - 1, std::memory_order_relaxed)) {
    }
}

void AgeFilter::redo_add(std::uint64_t generation, const ItemHash& hash) {
    if (generation > generation_.load(std::memory_order_relaxed)) {
        advance_to(generation, shifted_ms());
    }
    const std::uint64_t g = generation_.load(std::memory_order_relaxed);
    // Generations at or below g − n have been recycled: their slices hold
    // newer ones now, which the primary's add never reached.
    if (generation + slices() <= g) return;
    for (std::uint32_t p = 0; p < geometry_.shape.k; ++p) {
        // Generation − p (which may precede 0: the slices generation 0's
        // adds reach back into) is live while it is above g − n.
        if (generation + slices() > g + p) {
            set_bit(group(hash), physical(generation + slices() - p), hash);
        }
    }
    count_item(generation);
}

std::uint64_t AgeFilter::generation_count(std::uint64_t generation) const {
    const std::uint64_t g = generation_.load(std::memory_order_acquire);
    if (generation > g || generation + slices() <= g) return 0;
    std::uint64_t total = counts_[physical(generation)].load(std::memory_order_relaxed);
    if (generation + 1 >= g) {
        for (std::size_t i = 0; i < kSlots; ++i) {
            total += slots_[i].count[generation & 1].load(std::memory_order_relaxed);
        }
    }
    return total;
}

std::uint64_t AgeFilter::items() const {
    const std::uint64_t g = generation();
    const std::uint64_t oldest = g >= geometry_.shape.l ? g - geometry_.shape.l : 0;
    std::uint64_t total = 0;
    for (std::uint64_t L = oldest; L <= g; ++L) total += generation_count(L);
    return total;
}

void AgeFilter::set_counts(const std::uint64_t* counts, std::size_t n) {
    const std::uint64_t g = generation_.load(std::memory_order_relaxed);
    for (std::size_t i = 0; i < kSlots; ++i) {
        slots_[i].count[0].store(0, std::memory_order_relaxed);
        slots_[i].count[1].store(0, std::memory_order_relaxed);
    }
    for (std::uint32_t i = 0; i < slices(); ++i) {
        const std::uint64_t count = i < n && i <= g ? counts[i] : 0;
        counts_[physical(g + slices() - i)].store(count, std::memory_order_relaxed);
    }
    const std::uint64_t taken =
        std::min(counts_[physical(g)].load(std::memory_order_relaxed), geometry_.generation_items);
    room_.store(room_word(g, geometry_.generation_items - taken), std::memory_order_relaxed);
}

std::uint64_t AgeFilter::slice_set_bits(std::uint32_t s) const {
    std::uint64_t ones = 0;
    for (std::uint64_t b = 0; b < blocks(); ++b) {
        for (std::uint32_t i = 0; i < kBlockWords; ++i) {
            ones += static_cast<std::uint64_t>(std::popcount(load_word(word_index(b, s, i))));
        }
    }
    return ones;
}

double AgeFilter::estimated_false_positive_rate() const {
    const std::uint64_t g = generation();
    const auto m = static_cast<double>(geometry_.slice_bits);
    return age_run_probability(geometry_.shape.k, slices(), [&](std::uint32_t p) {
        return static_cast<double>(slice_set_bits(physical(g + slices() - p))) / m;
    });
}

// The window's generations, newest first, in blocks of k: the slice of the
// oldest generation of a block holds exactly the block's items (an item
// stamped S is in the slices of S − k + 1 .. S), so its fill estimates them.
// A last block cut by the window's start is taken from the counts.
std::uint64_t AgeFilter::estimate_cardinality() const {
    const std::uint64_t g = generation();
    const std::uint64_t k = geometry_.shape.k;
    const std::uint64_t start = g >= geometry_.shape.l ? g - geometry_.shape.l : 0;
    const std::uint64_t m = geometry_.slice_bits;
    double total = 0.0;
    for (std::uint64_t top = g + 1; top > start;) {
        const std::uint64_t newest = top - 1;
        // The block's oldest generation, newest − k + 1 (below 0 when the
        // filter is young: no item is stamped there).
        if (newest + 1 >= start + k || start == 0) {
            const std::uint32_t s = physical(newest + slices() - (k - 1));
            total += estimate_items(m, 1, m - slice_set_bits(s));
            top = newest + 1 >= k ? newest + 1 - k : 0;
        } else {
            for (std::uint64_t L = start; L <= newest; ++L) {
                total += static_cast<double>(generation_count(L));
            }
            top = start;
        }
    }
    return static_cast<std::uint64_t>(std::llround(total));
}

std::uint64_t AgeFilter::load_word(std::uint64_t index) const {
    return WordRef(words_[index]).load(std::memory_order_relaxed);
}

void AgeFilter::copy_words(std::uint64_t first, std::uint64_t count, std::uint64_t* out) const {
    for (std::uint64_t i = 0; i < count; ++i) out[i] = load_word(first + i);
}

void AgeFilter::store_words(std::uint64_t first, std::uint64_t count, const std::uint64_t* in) {
    for (std::uint64_t i = 0; i < count; ++i) {
        WordRef(words_[first + i]).store(in[i], std::memory_order_relaxed);
    }
}

void AgeFilter::or_words(std::uint64_t first, std::string_view data) {
    for (std::size_t i = 0; i * 8 < data.size(); ++i) {
        std::uint64_t word;
        std::memcpy(&word, data.data() + i * 8, 8);
        WordRef(words_[first + i]).fetch_or(little_endian::to_le(word), std::memory_order_relaxed);
    }
}

void AgeFilter::redo_words(std::uint64_t generation, std::uint64_t first, std::string_view data) {
    if (generation > generation_.load(std::memory_order_relaxed)) {
        advance_to(generation, shifted_ms());
    }
    const std::uint64_t g = generation_.load(std::memory_order_relaxed);
    const std::uint64_t n = slices();
    for (std::size_t i = 0; i * 8 < data.size(); ++i) {
        const std::uint64_t slice = ((first + i) / (kAgeBlockBits / 64)) % n;
        // The generation slice held at `generation`, plus n: the one that
        // recycled it, if that shift has been made.
        const std::uint64_t recycled_by = generation + n - (generation + n - slice) % n;
        if (recycled_by <= g) continue;
        std::uint64_t word;
        std::memcpy(&word, data.data() + i * 8, 8);
        WordRef(words_[first + i]).fetch_or(little_endian::to_le(word), std::memory_order_relaxed);
    }
}

}  // namespace bloomery::bloom
