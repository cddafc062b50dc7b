#pragma once
// A scalable Bloom filter (Almeida et al. 2007), as RedisBloom's: a chain of
// layers; layer i has capacity c·s^i and error p·r^(i+1) with r = 0.5 and
// s = expansion, so the compound false-positive rate stays within p. A
// NONSCALING filter is one layer at error p and refuses adds once full.
//
// Thread safety: add(), contains() and the getters are safe from many threads
// at once. Layers live in a fixed array of pointers published with release /
// acquire on the layer count, so readers take no lock; only creating a layer
// takes the filter's growth mutex. Destroying the filter (or replacing it) must
// be excluded by the owner (the keyspace's shard lock).

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>

#include "bloomery/bloom/filter.hpp"

namespace bloomery::bloom {

struct FilterOptions {
    double error_rate = 0.01;
    std::uint64_t capacity = 100;
    std::uint32_t expansion = 2;
    bool nonscaling = false;
};

enum class AddResult {
    added,            // the item was new (at least one bit was set)
    exists,           // the filter already reported the item as present
    full,             // NONSCALING filter at capacity: "non scaling filter is full"
    too_many_layers,  // scaling filter hit kMaxLayers
    too_large,        // the next layer would exceed max_layer_bytes
};

class ScalableFilter {
public:
    static constexpr std::size_t kMaxLayers = 64;
    // Ratio applied to each new layer's error rate (and to the first layer of a
    // scaling filter), RedisBloom's ERROR_TIGHTENING_RATIO.
    static constexpr double kTighteningRatio = 0.5;

    // Creates the first layer. `max_layer_bytes` bounds every layer's bit array
    // (0 = unbounded); callers check the first layer with would_fit() first.
    explicit ScalableFilter(const FilterOptions& options, std::uint64_t max_layer_bytes = 0);
    // An empty chain for loading: layers are appended with append_layer().
    struct Empty {};
    ScalableFilter(Empty, const FilterOptions& options, std::uint64_t max_layer_bytes = 0);

    // True if a first layer for `options` would fit in `max_layer_bytes`.
    static bool would_fit(const FilterOptions& options, std::uint64_t max_layer_bytes);

    AddResult add(std::string_view item);
    AddResult add(const ItemHash& hash);
    bool contains(std::string_view item) const;
    bool contains(const ItemHash& hash) const;

    const FilterOptions& options() const { return options_; }
    std::size_t num_layers() const { return num_layers_.load(std::memory_order_acquire); }
    const BloomLayer& layer(std::size_t i) const { return *layers_[i]; }
    BloomLayer& layer(std::size_t i) { return *layers_[i]; }

    std::uint64_t capacity() const;   // sum of layer capacities
    std::uint64_t items() const;      // sum of layer item counts
    std::uint64_t byte_size() const;  // bit arrays plus bookkeeping
    std::uint64_t bits_size() const;  // bit arrays only, in bytes
    // sum over layers of round((m/k)·ln(m/m0)); see estimate_items().
    std::uint64_t estimate_cardinality() const;

    // For loaders: appends a layer with explicit geometry. Not concurrent with add().
    BloomLayer& append_layer(std::uint64_t capacity, double error_rate, std::uint64_t bits,
                             std::uint32_t hashes);

private:
    AddResult grow_locked(std::size_t seen_layers);

    FilterOptions options_;
    std::uint64_t max_layer_bytes_;
    std::array<std::unique_ptr<BloomLayer>, kMaxLayers> layers_;
    std::atomic<std::size_t> num_layers_{0};
    std::mutex growth_mutex_;
};

}  // namespace bloomery::bloom
