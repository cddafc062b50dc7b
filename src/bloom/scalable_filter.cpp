#include "bloomery/bloom/scalable_filter.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <vector>

#include "bloomery/bloom/params.hpp"
#include "bloomery/bloom/redisbloom.hpp"
#include "bloomery/core/memory.hpp"

namespace bloomery::bloom {

namespace {

static_assert(sizeof(ScalableFilter) <= 80,
              "a default filter (header + 144 bytes of words) must fit a 224-byte size class");
static_assert(kMaxLayers <= 255 && kMaxExpansion <= 65535, "packed header fields");

// Growth is rare (once per doubling of a filter), so filters share a small
// pool of locks instead of carrying a 40-byte mutex each.
std::mutex& growth_lock(const void* filter) {
    static std::mutex locks[64];
    const auto address = reinterpret_cast<std::uintptr_t>(filter);
    return locks[(address >> 6) % 64];
}

constexpr std::size_t kMoreLayers = kMaxLayers - 1;
constexpr std::uint8_t kNonscaling = 1;
constexpr std::uint8_t kBlocked = 2;
// The RedisBloom scheme, and the chain options it needs besides NONSCALING.
constexpr std::uint8_t kRedisBloom = 4;
constexpr std::uint8_t kRedisBloomNoRoundFlag = 8;
constexpr std::uint8_t kRedisBloomForce64Flag = 16;
constexpr std::uint8_t kAutomatic = 32;  // Layout::automatic
// Layout::automatic_blocks: kBlocked and kAutomatic together.
constexpr std::uint8_t kCounting = ScalableFilter::kCountingFlag;  // alone of the three layouts
// A tightening ratio other than kDefaultTightening, kept in the 8 bytes right
// behind the object (before inline words): filters at the default stay
// within their 224-byte size class.
constexpr std::uint8_t kOwnTightening = 128;

std::uint8_t flags_of(const FilterOptions& options) {
    std::uint8_t flags = (options.nonscaling ? kNonscaling : 0) |
                         (options.layout == Layout::blocked ? kBlocked : 0) |
                         (options.layout == Layout::automatic ? kAutomatic : 0) |
                         (options.layout == Layout::automatic_blocks ? kBlocked | kAutomatic : 0) |
                         (options.layout == Layout::counting ? kCounting : 0);
    if (options.scheme == HashScheme::redisbloom) {
        flags |= kRedisBloom;
        if ((options.redisbloom_options & kRedisBloomNoRound) != 0) flags |= kRedisBloomNoRoundFlag;
        if ((options.redisbloom_options & kRedisBloomForce64) != 0) flags |= kRedisBloomForce64Flag;
    }
    if (options.tightening != kDefaultTightening) flags |= kOwnTightening;
    return flags;
}

// Bytes behind the object before the first layer's inline words.
std::uint64_t extension_bytes(std::uint8_t flags) {
    return (flags & kOwnTightening) != 0 ? sizeof(double) : 0;
}

std::uint64_t header_bytes(std::uint8_t flags, const LayerGeometry& first) {
    return sizeof(ScalableFilter) + extension_bytes(flags) + BloomLayer::inline_bytes(first);
}

}  // namespace

ScalableFilter::ScalableFilter(const FilterOptions& options, const LayerGeometry& first,
                               std::uint64_t* first_words)
    : flags_(flags_of(options)),
      expansion_(static_cast<std::uint16_t>(options.expansion)),
      error_rate_(options.error_rate),
      capacity_(options.capacity),
      id_and_stamp_(next_id()),
      first_(first, first_words) {}

namespace {
std::atomic<std::uint64_t> g_next_filter_id{1};
}

std::uint64_t ScalableFilter::next_id() {
    // 2^48 ids: a million new filters a second for nine years.
    return g_next_filter_id.fetch_add(1, std::memory_order_relaxed) & kIdMask;
}

void ScalableFilter::reserve_ids_through(std::uint64_t id) {
    std::uint64_t next = g_next_filter_id.load(std::memory_order_relaxed);
    while (next <= id &&
           !g_next_filter_id.compare_exchange_weak(next, id + 1, std::memory_order_relaxed)) {
    }
}

void ScalableFilter::set_id(std::uint64_t id) {
    std::uint64_t word = id_and_stamp_.load(std::memory_order_relaxed);
    while (!id_and_stamp_.compare_exchange_weak(word, (word & ~kIdMask) | (id & kIdMask),
                                                std::memory_order_relaxed)) {
    }
}

void ScalableFilter::set_count_stamp(std::uint16_t stamp) const {
    std::uint64_t word = id_and_stamp_.load(std::memory_order_relaxed);
    while (!id_and_stamp_.compare_exchange_weak(
        word, (word & kIdMask) | (std::uint64_t{stamp} << 48), std::memory_order_release,
        std::memory_order_relaxed)) {
    }
}

ScalableFilter::~ScalableFilter() {
    BloomLayer** more = more_layers_.load(std::memory_order_acquire);
    if (more != nullptr) {
        const std::size_t n = num_layers_.load(std::memory_order_acquire);
        for (std::size_t i = 1; i < n; ++i) LayerDeleter{}(more[i - 1]);
        delete[] more;
    }
}

// Bytes of filter memory reserved against --maxmemory before they are
// allocated: two clients creating or growing filters at once can never both
// pass the limit (a check followed by an allocation let 8 of 64 concurrent
// 94 MB BF.RESERVEs through a 100 MB limit). Each allocation takes its share
// once it succeeded; what is left goes back with the reservation.
class ScalableFilter::MemoryReservation {
public:
    MemoryReservation(std::uint64_t bytes, std::uint64_t maxmemory)
        : left_(core::memory_try_add(core::MemoryUse::filters, bytes, maxmemory) ? bytes : 0),
          held_(left_ != 0 || bytes == 0) {}
    ~MemoryReservation() {
        if (left_ != 0) {
            core::memory_add(core::MemoryUse::filters, -static_cast<std::int64_t>(left_));
        }
    }
    MemoryReservation(const MemoryReservation&) = delete;
    MemoryReservation& operator=(const MemoryReservation&) = delete;
    bool held() const { return held_; }
    // Up to `bytes` of the reservation, now owned by an allocation.
    std::uint64_t take(std::uint64_t bytes) {
        const std::uint64_t taken = std::min(bytes, left_);
        left_ -= taken;
        return taken;
    }

private:
    std::uint64_t left_;
    bool held_;
};

namespace {
// Counts `bytes` of a new allocation, the part `reserved` does not already hold.
template <class Reservation>
void count_allocation(std::uint64_t bytes, Reservation* reserved) {
    const std::uint64_t covered = reserved != nullptr ? reserved->take(bytes) : 0;
    if (bytes > covered) {
        core::memory_add(core::MemoryUse::filters, static_cast<std::int64_t>(bytes - covered));
    }
}
}  // namespace

FilterRef ScalableFilter::allocate(const FilterOptions& options, const LayerGeometry& first,
                                   MemoryReservation* reserved) {
    const std::uint8_t flags = flags_of(options);
    const std::size_t inline_bytes = BloomLayer::inline_bytes(first);
    const std::size_t extension = extension_bytes(flags);
    void* block = ::operator new(sizeof(ScalableFilter) + extension + inline_bytes);
    char* behind = static_cast<char*>(block) + sizeof(ScalableFilter);
    if (extension != 0) std::memcpy(behind, &options.tightening, sizeof options.tightening);
    std::uint64_t* words = nullptr;
    if (inline_bytes != 0) {
        words = reinterpret_cast<std::uint64_t*>(behind + extension);
        std::memset(words, 0, inline_bytes);
    }
    ScalableFilter* filter;
    try {
        filter = new (block) ScalableFilter(options, first, words);
    } catch (...) {
        ::operator delete(block);
        throw;
    }
    count_allocation(header_bytes(flags, first) + filter->first_.mapped_bytes(), reserved);
    return FilterRef(filter);
}

FilterRef ScalableFilter::create(const FilterOptions& options, std::uint64_t maxmemory) {
    const LayerGeometry first = first_layer(options);
    return create(options, std::span(&first, 1), maxmemory);
}

FilterRef ScalableFilter::create(const FilterOptions& options,
                                 std::span<const LayerGeometry> layers, std::uint64_t maxmemory) {
    MemoryReservation reserved(allocation_bytes(layers) + extension_bytes(flags_of(options)),
                               maxmemory);
    if (!reserved.held()) return {};
    FilterRef filter = allocate(options, layers.front(), &reserved);
    for (std::size_t i = 1; i < layers.size(); ++i) {
        filter->append_layer(make_layer(layers[i]), &reserved);
    }
    return filter;
}

FilterRef ScalableFilter::copy_of(const ScalableFilter& source, std::size_t num_layers,
                                  std::uint64_t maxmemory) {
    std::vector<LayerGeometry> layers(num_layers);
    std::vector<std::uint64_t> counts(num_layers);
    for (std::size_t i = 0; i < num_layers; ++i) {
        layers[i] = source.layer(i).geometry();
        counts[i] = source.layer(i).items();
    }
    FilterRef copy = create(source.options(), layers, maxmemory);
    if (!copy) return copy;
    // 1 MiB of words at a time: a copy never holds a third copy of a big
    // layer. Only the source's touched regions: every other word is zero,
    // as the new layer's are.
    constexpr std::uint64_t kWordsAtOnce = (std::uint64_t{1} << 20) / 8;
    std::vector<std::uint64_t> words;
    for (std::size_t i = 0; i < num_layers; ++i) {
        const BloomLayer& from = source.layer(i);
        BloomLayer& to = copy->layer(i);
        to.set_items(counts[i]);
        const std::uint64_t num_words = from.num_words();
        for (std::uint64_t first = from.next_touched(0); first < num_words;
             first = from.next_touched(first)) {
            const std::uint64_t end = from.touched_end(first);
            for (; first < end; first += words.size()) {
                words.resize(static_cast<std::size_t>(std::min(kWordsAtOnce, end - first)));
                from.copy_words(first, words.size(), words.data());
                to.store_words(first, words.size(), words.data());
            }
        }
    }
    return copy;
}

std::uint64_t ScalableFilter::allocation_bytes(std::span<const LayerGeometry> layers) {
    if (layers.empty()) return 0;
    std::uint64_t total = header_bytes(0, layers.front());
    total += layer_allocation_bytes(layers.front()) - sizeof(BloomLayer) -
             BloomLayer::inline_bytes(layers.front());  // its mapping, if any
    if (layers.size() > 1)
        total += kMoreLayers *
                 sizeof(BloomLayer*);  // NOLINT(bugprone-sizeof-expression): a pointer per layer
    for (std::size_t i = 1; i < layers.size(); ++i) total += layer_allocation_bytes(layers[i]);
    return total;
}

void ScalableFilter::release() const {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    auto* self = const_cast<ScalableFilter*>(this);
    core::memory_add(core::MemoryUse::filters, -static_cast<std::int64_t>(allocated_bytes()));
    self->~ScalableFilter();
    ::operator delete(self);
}

void ScalableFilter::append_layer(LayerPtr layer, MemoryReservation* reserved) {
    const std::size_t n = num_layers_.load(std::memory_order_relaxed);
    BloomLayer** more = more_layers_.load(std::memory_order_relaxed);
    std::uint64_t charged = layer_allocation_bytes(layer->geometry());
    if (more == nullptr) {
        more = new BloomLayer*[kMoreLayers]();
        charged += kMoreLayers *
                   sizeof(BloomLayer*);  // NOLINT(bugprone-sizeof-expression): a pointer per layer
        more_layers_.store(more, std::memory_order_release);
    }
    more[n - 1] = layer.release();
    count_allocation(charged, reserved);
    // Release: a reader that sees n + 1 layers sees the fully built layer.
    num_layers_.store(static_cast<std::uint8_t>(n + 1), std::memory_order_release);
}

BloomLayer& ScalableFilter::append_layer_for_load(const LayerGeometry& geometry) {
    const std::size_t n = num_layers();
    if (n >= kMaxLayers) throw std::length_error("too many layers");
    append_layer(make_layer(geometry));
    return layer(n);
}

const BloomLayer& ScalableFilter::layer(std::size_t i) const {
    if (i == 0) return first_;
    return *more_layers_.load(std::memory_order_acquire)[i - 1];
}

BloomLayer& ScalableFilter::layer(std::size_t i) {
    if (i == 0) return first_;
    return *more_layers_.load(std::memory_order_acquire)[i - 1];
}

FilterOptions ScalableFilter::options() const {
    FilterOptions options;
    options.error_rate = error_rate_;
    options.capacity = capacity_;
    options.expansion = expansion_;
    options.nonscaling = (flags_ & kNonscaling) != 0;
    const bool both = (flags_ & (kBlocked | kAutomatic)) == (kBlocked | kAutomatic);
    options.layout = both                         ? Layout::automatic_blocks
                     : (flags_ & kBlocked) != 0   ? Layout::blocked
                     : (flags_ & kAutomatic) != 0 ? Layout::automatic
                     : (flags_ & kCounting) != 0  ? Layout::counting
                                                  : Layout::classic;
    if ((flags_ & kRedisBloom) != 0) {
        options.scheme = HashScheme::redisbloom;
        options.redisbloom_options =
            ((flags_ & kRedisBloomNoRoundFlag) != 0 ? kRedisBloomNoRound : 0) |
            ((flags_ & kRedisBloomForce64Flag) != 0 ? kRedisBloomForce64 : 0) |
            (options.nonscaling ? kRedisBloomNoScaling : 0);
    }
    if ((flags_ & kOwnTightening) != 0) {
        std::memcpy(&options.tightening, reinterpret_cast<const char*>(this) + sizeof(*this),
                    sizeof options.tightening);
    }
    return options;
}

HashScheme ScalableFilter::scheme() const {
    return (flags_ & kRedisBloom) != 0 ? HashScheme::redisbloom : HashScheme::bloomery;
}

ItemHash ScalableFilter::hash(std::string_view item) const {
    if ((flags_ & kRedisBloom) == 0) return hash_item(item);
    return redisbloom_hash(item, (flags_ & kRedisBloomForce64Flag) != 0 ? kRedisBloomForce64 : 0);
}

AddResult ScalableFilter::add(std::string_view item, const GrowthLimits& limits,
                              AddRecorder* recorder) {
    return add(hash(item), limits, recorder);
}

AddResult ScalableFilter::add(const ItemHash& hash, const GrowthLimits& limits,
                              AddRecorder* recorder) {
    if (counting()) return count_add(hash, limits, recorder);
    std::size_t layer_index = 0;
    const AddResult planned = plan_add(hash, limits, layer_index);
    if (planned != AddResult::added) return planned;
    if (recorder != nullptr && !recorder->record(static_cast<std::uint32_t>(layer_index), hash)) {
        cancel_add(layer_index);
        return AddResult::out_of_memory;
    }
    commit_add(layer_index, hash);
    return AddResult::added;
}

bool ScalableFilter::contains(std::string_view item) const {
    return contains(hash(item));
}

bool ScalableFilter::contains(const ItemHash& hash) const {
    const std::size_t n = num_layers();
    // Newest first: it is the biggest and holds the most recent items, and
    // RedisBloom checks in the same order.
    for (std::size_t i = n; i-- > 0;) {
        if (layer(i).contains(hash)) return true;
    }
    return false;
}

template <class Probe>
void ScalableFilter::hash_and_probe(std::span<const std::string_view> items, std::size_t first,
                                    std::size_t n, ItemHash* hashes, Probe&& probe) const {
    // Adds and classic lookups: a group of 16 is hashed, each item's words
    // prefetched in the newest layer (adds set bits there, lookups start
    // there) as its hash is ready, then the group is probed. Hashing the
    // whole batch first, as blocked lookups do (contains_many), was slower
    // here for classic lookups and for blocked adds (an add's locked `or`s
    // hold back the prefetches behind them).
    const BloomLayer& newest = layer(num_layers() - 1);
    constexpr std::size_t kGroup = 16;
    for (std::size_t g = 0; g < n; g += kGroup) {
        const std::size_t end = std::min(n, g + kGroup);
        for (std::size_t i = g; i < end; ++i) {
            hashes[i] = hash(items[first + i]);
            newest.prefetch(hashes[i]);
        }
        for (std::size_t i = g; i < end; ++i) probe(i);
    }
}

std::size_t ScalableFilter::add_many(std::span<const std::string_view> items,
                                     const GrowthLimits& limits, std::span<AddResult> out,
                                     AddRecorder* recorder) {
    ItemHash hashes[kBatch];
    std::size_t done = 0;
    for (std::size_t first = 0; first < items.size(); first += kBatch) {
        const std::size_t n = std::min(kBatch, items.size() - first);
        bool stopped = false;
        // One item after another, as RedisBloom adds them: each is looked up
        // after the bits of the items before it are set, so an item that
        // only a false positive of its own batch makes present answers 0 and
        // is neither recorded nor counted, here and on replay alike.
        hash_and_probe(items, first, n, hashes, [&](std::size_t i) {
            if (stopped) return;
            const AddResult result = add(hashes[i], limits, recorder);
            out[done++] = result;
            stopped = result != AddResult::added && result != AddResult::exists;
        });
        if (stopped) return done;
    }
    return done;
}

void ScalableFilter::contains_many(std::span<const std::string_view> items,
                                   std::span<std::uint8_t> out) const {
    ItemHash hashes[kBatch];
    for (std::size_t first = 0; first < items.size(); first += kBatch) {
        const std::size_t n = std::min(kBatch, items.size() - first);
        std::uint8_t* found = out.data() + first;
        const std::size_t layers = num_layers();
        const BloomLayer& newest = layer(layers - 1);
        if (!blocked_layout(newest.layout())) {
            // Counting layers are blocked too, but their cells are probed
            // one item at a time.
            hash_and_probe(items, first, n, hashes,
                           [&](std::size_t i) { found[i] = contains(hashes[i]) ? 1 : 0; });
            continue;
        }
        // Blocked, one line per item: the whole batch hashed first, then
        // probed in one loop with blocks prefetched ahead. Hashing and
        // prefetching in one loop was slower: the misses held the hashing
        // back.
        for (std::size_t i = 0; i < n; ++i) hashes[i] = hash(items[first + i]);
        newest.contains_blocked(hashes, n, found);
        // Then the older layers, newest first, for what the newest lacks.
        for (std::size_t l = layers - 1; l-- > 0;) {
            const BloomLayer& older = layer(l);
            for (std::size_t i = 0; i < n; ++i) {
                if (found[i] == 0) found[i] = older.contains(hashes[i]) ? 1 : 0;
            }
        }
    }
}

AddResult ScalableFilter::plan_add(const ItemHash& hash, const GrowthLimits& limits,
                                   std::size_t& layer_index) {
    std::size_t n = num_layers();
    for (std::size_t i = n; i-- > 0;) {
        if (layer(i).contains(hash)) return AddResult::exists;
    }
    // Room first, then bits: a layer takes exactly its capacity in items,
    // however many threads add at once, and grows only when it is full.
    while (!layer(n - 1).reserve_item()) {
        if ((flags_ & kNonscaling) != 0) return AddResult::full;
        const AddResult grown = grow(n, limits);
        if (grown != AddResult::added) return grown;
        n = num_layers();
    }
    layer_index = n - 1;
    return AddResult::added;
}

void ScalableFilter::commit_add(std::size_t layer_index, const ItemHash& hash) {
    // Counted even when another thread set every bit first (it added the same
    // item at the same time): the add was recorded, and a replay counts what
    // was recorded, so live and replayed counts stay equal.
    BloomLayer& target = layer(layer_index);
    target.add(hash);
    target.commit_item();
}

void ScalableFilter::cancel_add(std::size_t layer_index) {
    layer(layer_index).cancel_item();
}

bool ScalableFilter::redo_layers(std::size_t layer_index) {
    if (layer_index >= kMaxLayers) return false;
    if ((flags_ & kNonscaling) != 0 && layer_index > 0) return false;
    while (num_layers() <= layer_index) {
        const std::optional<LayerGeometry> next =
            next_layer(options(), layer(num_layers() - 1).geometry());
        if (!next) return false;
        append_layer_for_load(*next);
    }
    return true;
}

void ScalableFilter::redo_add(std::size_t layer_index, const ItemHash& hash) {
    BloomLayer& target = layer(layer_index);
    target.add(hash);
    target.count_item();
}

// Returns `added` when the caller may proceed to add into the (possibly new)
// last layer.
AddResult ScalableFilter::grow(std::size_t seen_layers, const GrowthLimits& limits) {
    std::lock_guard lock(growth_lock(this));
    const std::size_t n = num_layers_.load(std::memory_order_acquire);
    // Another thread grew the chain between our check and the lock: one new
    // layer per "full" event, never two.
    if (n != seen_layers) return AddResult::added;
    if (n >= kMaxLayers) return AddResult::too_many_layers;
    const std::optional<LayerGeometry> grown = next_layer(options(), layer(n - 1).geometry());
    if (!grown) return AddResult::too_many_layers;
    const LayerGeometry& next = *grown;
    if (limits.max_filter_bytes != 0 && bits_size() + next.bits / 8 > limits.max_filter_bytes) {
        return AddResult::too_large;
    }
    std::uint64_t cost = layer_allocation_bytes(next);
    if (more_layers_.load(std::memory_order_relaxed) == nullptr) {
        cost += kMoreLayers *
                sizeof(BloomLayer*);  // NOLINT(bugprone-sizeof-expression): a pointer per layer
    }
    MemoryReservation reserved(cost, limits.maxmemory);
    if (!reserved.held()) return AddResult::out_of_memory;
    try {
        append_layer(make_layer(next), &reserved);
    } catch (const std::bad_alloc&) {
        return AddResult::out_of_memory;
    }
    return AddResult::added;
}

std::uint64_t ScalableFilter::capacity() const {
    // Bounded by kMaxLayers · kMaxLayerCapacity < 2^63: no overflow.
    const std::size_t n = num_layers();
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < n; ++i) total += layer(i).capacity();
    return total;
}

std::uint64_t ScalableFilter::items() const {
    const std::size_t n = num_layers();
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < n; ++i) total += layer(i).items();
    return total;
}

std::uint64_t ScalableFilter::bits_size() const {
    const std::size_t n = num_layers();
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < n; ++i) total += layer(i).byte_size();
    return total;
}

std::uint64_t ScalableFilter::allocated_bytes() const {
    const std::size_t n = num_layers();
    std::uint64_t total = header_bytes(flags_, first_.geometry()) + first_.mapped_bytes();
    if (n > 1)
        total += kMoreLayers *
                 sizeof(BloomLayer*);  // NOLINT(bugprone-sizeof-expression): a pointer per layer
    for (std::size_t i = 1; i < n; ++i) total += layer_allocation_bytes(layer(i).geometry());
    return total;
}

std::uint64_t ScalableFilter::info_size() const {
    if ((flags_ & kRedisBloom) == 0) return allocated_bytes();
    const std::size_t n = num_layers();
    return kRedisBloomChainBytes + n * kRedisBloomLinkBytes + bits_size();
}

std::uint64_t ScalableFilter::estimate_cardinality() const {
    const std::size_t n = num_layers();
    double total = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const BloomLayer& l = layer(i);
        const std::uint64_t set = l.set_bits();
        const std::uint64_t zero = set >= l.cells() ? 0 : l.cells() - set;
        const double estimate = estimate_items(l.cells(), l.hashes(), zero);
        // llround is only defined below 2^63; beyond that rounding is moot.
        total += estimate < 9.0e18 ? static_cast<double>(std::llround(estimate)) : estimate;
    }
    // Terms are finite (estimate_items caps saturation) but could exceed
    // int64: clamp to what BF.CARD can answer instead of a negative number.
    constexpr double kMaxAnswer = 9.2e18;
    if (!(total < kMaxAnswer)) return static_cast<std::uint64_t>(kMaxAnswer);
    return static_cast<std::uint64_t>(total);
}

double ScalableFilter::estimated_false_positive_rate() const {
    const std::size_t n = num_layers();
    // ln of the chance that no layer answers "maybe", summed in logs so that
    // rates near 1e-15 are not lost to 1 − (1 − r) rounding.
    double log_none_match = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
        const BloomLayer& l = layer(i);
        log_none_match +=
            std::log1p(-fill_false_positive_rate(l.cells(), l.hashes(), l.set_bits()));
    }
    // 0 − expm1: an empty filter answers 0, not −0.
    return 0.0 - std::expm1(log_none_match);
}

}  // namespace bloomery::bloom
