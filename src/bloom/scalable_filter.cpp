#include "bloomery/bloom/scalable_filter.hpp"

#include <cmath>
#include <limits>
#include <new>
#include <stdexcept>

#include "bloomery/bloom/params.hpp"

namespace bloomery::bloom {

namespace {

double first_layer_error(const FilterOptions& options) {
    // RedisBloom tightens the first sub-filter too (p·r), so that the series
    // p·r + p·r² + ... stays below p; a NONSCALING filter has one layer and
    // keeps the full p.
    return options.nonscaling ? options.error_rate
                              : options.error_rate * ScalableFilter::kTighteningRatio;
}

bool fits(std::uint64_t bits, std::uint64_t max_layer_bytes) {
    return max_layer_bytes == 0 || bits / 8 <= max_layer_bytes;
}

}  // namespace

ScalableFilter::ScalableFilter(const FilterOptions& options, std::uint64_t max_layer_bytes)
    : ScalableFilter(Empty{}, options, max_layer_bytes) {
    layers_[0] = std::make_unique<BloomLayer>(options_.capacity, first_layer_error(options_));
    num_layers_.store(1, std::memory_order_release);
}

ScalableFilter::ScalableFilter(Empty, const FilterOptions& options, std::uint64_t max_layer_bytes)
    : options_(options), max_layer_bytes_(max_layer_bytes) {
    // Expansion 0 would make every later layer capacity 0, i.e. full at once.
    if (options_.expansion < 1) options_.expansion = 1;
}

bool ScalableFilter::would_fit(const FilterOptions& options, std::uint64_t max_layer_bytes) {
    return fits(optimal_bits(options.capacity, first_layer_error(options)), max_layer_bytes);
}

AddResult ScalableFilter::add(std::string_view item) {
    return add(hash_item(item));
}

bool ScalableFilter::contains(std::string_view item) const {
    return contains(hash_item(item));
}

bool ScalableFilter::contains(const ItemHash& hash) const {
    const std::size_t n = num_layers_.load(std::memory_order_acquire);
    // Newest first: it is the biggest and holds the most recent items, and
    // RedisBloom checks in the same order.
    for (std::size_t i = n; i-- > 0;) {
        if (layers_[i]->contains(hash)) return true;
    }
    return false;
}

AddResult ScalableFilter::add(const ItemHash& hash) {
    std::size_t n = num_layers_.load(std::memory_order_acquire);
    for (std::size_t i = n; i-- > 0;) {
        if (layers_[i]->contains(hash)) return AddResult::exists;
    }
    if (n == 0 || layers_[n - 1]->items() >= layers_[n - 1]->capacity()) {
        if (n != 0 && options_.nonscaling) return AddResult::full;
        std::lock_guard lock(growth_mutex_);
        const AddResult grown = grow_locked(n);
        if (grown != AddResult::added) return grown;
        n = num_layers_.load(std::memory_order_acquire);
    }
    // Under concurrent adds a layer can overshoot its capacity by at most
    // (threads - 1) items: the capacity check and the add are not one atomic
    // step. That keeps the hot path lock-free; the FPR cost is negligible.
    BloomLayer& last = *layers_[n - 1];
    if (!last.add(hash)) return AddResult::exists;
    last.add_items(1);
    return AddResult::added;
}

// Called with growth_mutex_ held. Returns `added` when the caller may proceed
// to add into the (possibly new) last layer.
AddResult ScalableFilter::grow_locked(std::size_t seen_layers) {
    const std::size_t n = num_layers_.load(std::memory_order_acquire);
    // Another thread grew the chain between our check and the lock: one new
    // layer per "full" event, never two.
    if (n != seen_layers) return AddResult::added;
    if (n >= kMaxLayers) return AddResult::too_many_layers;

    std::uint64_t capacity = options_.capacity;
    double error_rate = first_layer_error(options_);
    if (n != 0) {
        const BloomLayer& last = *layers_[n - 1];
        error_rate = last.error_rate() * kTighteningRatio;
        const std::uint64_t expansion = options_.expansion;
        if (last.capacity() > std::numeric_limits<std::uint64_t>::max() / expansion) {
            // Saturated capacity: no such layer could ever be allocated.
            return AddResult::too_large;
        }
        capacity = last.capacity() * expansion;
    }
    const std::uint64_t bits = optimal_bits(capacity, error_rate);
    if (!fits(bits, max_layer_bytes_)) return AddResult::too_large;
    // optimal_bits saturates; such a size cannot be allocated either.
    if (bits == (std::numeric_limits<std::uint64_t>::max() & ~std::uint64_t{63})) {
        return AddResult::too_large;
    }
    try {
        layers_[n] =
            std::make_unique<BloomLayer>(capacity, error_rate, bits, optimal_hashes(error_rate));
    } catch (const std::bad_alloc&) {
        // Unbounded max_layer_bytes and the OS refused: report it as the same
        // condition a bounded server would have hit.
        return AddResult::too_large;
    }
    // Release: a reader that sees n + 1 layers sees the fully built layer.
    num_layers_.store(n + 1, std::memory_order_release);
    return AddResult::added;
}

std::uint64_t ScalableFilter::capacity() const {
    const std::size_t n = num_layers();
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint64_t c = layers_[i]->capacity();
        total = c > std::numeric_limits<std::uint64_t>::max() - total
                    ? std::numeric_limits<std::uint64_t>::max()
                    : total + c;
    }
    return total;
}

std::uint64_t ScalableFilter::items() const {
    const std::size_t n = num_layers();
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < n; ++i) total += layers_[i]->items();
    return total;
}

std::uint64_t ScalableFilter::bits_size() const {
    const std::size_t n = num_layers();
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < n; ++i) total += layers_[i]->byte_size();
    return total;
}

std::uint64_t ScalableFilter::byte_size() const {
    // Bookkeeping: this object plus each layer object and its 16 padded
    // counter stripes (64 bytes each).
    const std::size_t n = num_layers();
    return bits_size() + sizeof(ScalableFilter) + n * (sizeof(BloomLayer) + 16 * 64);
}

std::uint64_t ScalableFilter::estimate_cardinality() const {
    const std::size_t n = num_layers();
    double total = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const BloomLayer& layer = *layers_[i];
        const std::uint64_t set = layer.set_bits();
        const std::uint64_t zero = set >= layer.bits() ? 0 : layer.bits() - set;
        const double estimate = estimate_items(layer.bits(), layer.hashes(), zero);
        // llround is only defined below 2^63; beyond that rounding is moot.
        total += estimate < 9.0e18 ? static_cast<double>(std::llround(estimate)) : estimate;
    }
    // Terms are finite (estimate_items caps saturation) but a 2^64-bit layer
    // could exceed uint64_t: clamp instead of an undefined conversion.
    if (!(total < 18446744073709551616.0)) return std::numeric_limits<std::uint64_t>::max();
    return static_cast<std::uint64_t>(total);
}

BloomLayer& ScalableFilter::append_layer(std::uint64_t capacity, double error_rate,
                                         std::uint64_t bits, std::uint32_t hashes) {
    const std::size_t n = num_layers_.load(std::memory_order_relaxed);
    if (n >= kMaxLayers) throw std::length_error("too many layers");
    layers_[n] = std::make_unique<BloomLayer>(capacity, error_rate, bits, hashes);
    num_layers_.store(n + 1, std::memory_order_release);
    return *layers_[n];
}

}  // namespace bloomery::bloom
