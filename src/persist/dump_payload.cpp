// DUMP / RESTORE payloads (proto/dump.md).

#include "bloomery/persist/dump_payload.hpp"

#include <bit>
#include <cstring>
#include <span>

#include "bloomery/bloom/bounds.hpp"
#include "bloomery/core/crc64.hpp"
#include "filter_body.hpp"
#include "snapshot_format.hpp"

namespace bloomery::persist {
namespace {

// write_filter_body()'s output, appended to a string until it would pass
// `limit` bytes there (then nothing more is appended: full()).
class StringOut {
public:
    StringOut(std::string& out, std::uint64_t limit) : out_(out), limit_(limit) {}
    void append(const void* data, std::size_t size) {
        if (full_ || out_.size() + size > limit_) {
            full_ = true;
            return;
        }
        out_.append(static_cast<const char*>(data), size);
    }
    bool full() const { return full_; }
    void append_u8(std::uint8_t v) {
        const auto c = static_cast<char>(v);
        append(&c, 1);
    }
    void append_u32(std::uint32_t v) {
        unsigned char b[4];
        format::put_u32(b, v);
        append(b, sizeof b);
    }
    void append_u64(std::uint64_t v) {
        unsigned char b[8];
        format::put_u64(b, v);
        append(b, sizeof b);
    }
    void append_f64(double v) { append_u64(std::bit_cast<std::uint64_t>(v)); }

private:
    std::string& out_;
    std::uint64_t limit_;
    bool full_ = false;
};

// A cursor over the value that refuses to read past its end.
class Reader {
public:
    explicit Reader(std::string_view bytes) : bytes_(bytes) {}
    std::size_t left() const { return bytes_.size() - at_; }
    bool u8(std::uint8_t& v) {
        if (left() < 1) return false;
        v = static_cast<std::uint8_t>(bytes_[at_++]);
        return true;
    }
    bool u32(std::uint32_t& v) {
        if (left() < 4) return false;
        v = format::get_u32(reinterpret_cast<const unsigned char*>(bytes_.data() + at_));
        at_ += 4;
        return true;
    }
    bool u64(std::uint64_t& v) {
        if (left() < 8) return false;
        v = format::get_u64(reinterpret_cast<const unsigned char*>(bytes_.data() + at_));
        at_ += 8;
        return true;
    }
    bool f64(double& v) {
        std::uint64_t bits;
        if (!u64(bits)) return false;
        v = std::bit_cast<double>(bits);
        return true;
    }
    std::string_view rest() const { return bytes_.substr(at_); }
    bool bytes(std::uint64_t n, std::string_view& v) {
        if (left() < n) return false;
        v = bytes_.substr(at_, static_cast<std::size_t>(n));
        at_ += static_cast<std::size_t>(n);
        return true;
    }

private:
    std::string_view bytes_;
    std::size_t at_ = 0;
};

std::uint16_t footer_version(std::string_view payload) {
    const auto* footer =
        reinterpret_cast<const unsigned char*>(payload.data() + payload.size() - kDumpFooterBytes);
    return static_cast<std::uint16_t>(footer[0] | (footer[1] << 8));
}

}  // namespace

bool append_dump_payload(const bloom::ScalableFilter& filter, std::size_t num_layers,
                         std::string& out, std::uint64_t max_bytes) {
    const std::size_t start = out.size();
    std::vector<std::uint64_t> counts(num_layers);
    for (std::size_t i = 0; i < num_layers; ++i) counts[i] = filter.layer(i).items();
    std::vector<std::uint64_t> words;
    StringOut writer(out, max_bytes > UINT64_MAX - start ? UINT64_MAX : start + max_bytes);
    writer.append_u8(kDumpTypeBloom);
    format::write_filter_body(writer, filter, num_layers, counts, words);
    const unsigned char version[2] = {static_cast<unsigned char>(kDumpPayloadVersion & 0xff),
                                      static_cast<unsigned char>(kDumpPayloadVersion >> 8)};
    writer.append(version, sizeof version);
    writer.append_u64(core::crc64(0, std::string_view(out).substr(start)));
    if (!writer.full()) return true;
    out.resize(start);
    return false;
}

bool verify_dump_payload(std::string_view payload) {
    if (payload.size() < kDumpFooterBytes) return false;
    const std::uint16_t version = footer_version(payload);
    if (version != kDumpPayloadVersion && version != kDumpPayloadWholeVersion) return false;
    const std::uint64_t stored = format::get_u64(
        reinterpret_cast<const unsigned char*>(payload.data() + payload.size() - 8));
    return core::crc64(0, payload.substr(0, payload.size() - 8)) == stored;
}

namespace {

core::Error truncated(const char* what) {
    return core::Error{std::string("value ends inside ") + what};
}

// The value's options, as a snapshot's filter record holds them.
core::Result<bloom::FilterOptions> parse_options(Reader& in) {
    bloom::FilterOptions options;
    std::uint8_t option_bits, layout, scheme;
    if (!in.f64(options.error_rate) || !in.u64(options.capacity) || !in.u32(options.expansion) ||
        !in.u8(option_bits) || !in.u8(layout) || !in.u8(scheme)) {
        return truncated("the options");
    }
    if ((option_bits & ~(format::kOptionNonscaling | format::kOptionTightening)) != 0) {
        return core::Error{"option bits " + std::to_string(option_bits) + " not understood"};
    }
    // The filter's setting may be auto; each layer's own layout (below) is
    // classic or blocked, or counting in a counting filter.
    if (layout > static_cast<std::uint8_t>(bloom::Layout::automatic_blocks)) {
        return core::Error{"unknown layout " + std::to_string(layout)};
    }
    if (scheme > static_cast<std::uint8_t>(bloom::HashScheme::redisbloom)) {
        return core::Error{"unknown hash scheme " + std::to_string(scheme)};
    }
    options.nonscaling = (option_bits & format::kOptionNonscaling) != 0;
    options.layout = static_cast<bloom::Layout>(layout);
    options.scheme = static_cast<bloom::HashScheme>(scheme);
    if (options.scheme == bloom::HashScheme::redisbloom && !in.u32(options.redisbloom_options)) {
        return truncated("the options");
    }
    if ((option_bits & format::kOptionTightening) != 0) {
        if (!in.f64(options.tightening)) return truncated("the options");
        // Written only when not the default: one encoding per filter.
        if (options.tightening == bloom::kDefaultTightening) {
            return core::Error{"tightening ratio 0.5 written out though it is the default"};
        }
    }
    if (const bloom::BoundsError e = bloom::check_stored_options(options);
        e != bloom::BoundsError::none) {
        return core::Error{"filter options: " + bloom::describe(e)};
    }
    return options;
}

// A layer's runs of `num_words` words (proto/snapshot.md, "Layer words"),
// checked: each pair leaves out or holds at least one word, and together
// they account for exactly `num_words`. `runs` is set to their bytes.
core::Status parse_runs(Reader& in, std::uint64_t num_words, std::string_view& runs) {
    const std::size_t before = in.left();
    const std::string_view rest = in.rest();
    for (std::uint64_t done = 0; done < num_words;) {
        std::uint64_t zeros, count;
        if (!in.u64(zeros) || !in.u64(count)) return truncated("a layer's runs");
        if (zeros == 0 && count == 0) return core::Error{"a run of no words"};
        if (zeros > num_words - done || count > num_words - done - zeros) {
            return core::Error{"runs past the layer's " + std::to_string(num_words) + " words"};
        }
        std::string_view skipped;
        if (!in.bytes(count * 8, skipped)) return truncated("a layer's runs");
        done += zeros + count;
    }
    runs = rest.substr(0, before - in.left());
    return {};
}

// Layer `index` of `out`'s filter: its geometry and item count, checked, and
// where its words lie.
core::Status parse_layer(Reader& in, std::uint32_t index, DumpValue& out) {
    bloom::LayerGeometry g;
    std::uint8_t layer_layout;
    std::uint64_t items;
    if (!in.u64(g.capacity) || !in.f64(g.error_rate) || !in.u64(g.bits) || !in.u32(g.hashes) ||
        !in.u8(layer_layout)) {
        return truncated("a layer header");
    }
    if (!bloom::layer_layout_fits(out.options.layout, layer_layout)) {
        return core::Error{"layer " + std::to_string(index) + ": layout " +
                           std::to_string(layer_layout) + " does not fit the filter's"};
    }
    g.layout = static_cast<bloom::Layout>(layer_layout);
    g.scheme = out.options.scheme;
    if (g.scheme == bloom::HashScheme::redisbloom &&
        (!in.f64(g.redisbloom_bpe) || !in.u8(g.redisbloom_n2))) {
        return truncated("a layer header");
    }
    if (!in.u64(items)) return truncated("a layer header");
    if (const bloom::BoundsError e = bloom::check_layer(g, items); e != bloom::BoundsError::none) {
        return core::Error{"layer " + std::to_string(index) + ": " + bloom::describe(e)};
    }
    // Checked against the bytes there before anything is sized by it.
    std::string_view words;
    if (out.runs) {
        if (core::Status runs = parse_runs(in, g.bits / 64, words); !runs) {
            return core::Error{"layer " + std::to_string(index) + ": " + runs.error()};
        }
    } else if (!in.bytes(g.bits / 8, words)) {
        return truncated("a layer's bits");
    }
    out.layers.push_back(g);
    out.items.push_back(items);
    out.layer_words.push_back(words);
    return {};
}

}  // namespace

core::Result<DumpValue> parse_dump_value(std::string_view payload) {
    if (payload.size() < kDumpFooterBytes) return core::Error{"shorter than the footer"};
    Reader in(payload.substr(0, payload.size() - kDumpFooterBytes));
    std::uint8_t type;
    if (!in.u8(type)) return truncated("the type");
    if (type != kDumpTypeBloom) return core::Error{"unknown value type " + std::to_string(type)};
    DumpValue out;
    out.runs = footer_version(payload) == kDumpPayloadVersion;
    core::Result<bloom::FilterOptions> options = parse_options(in);
    if (!options) return options.failure();
    out.options = *options;
    std::uint32_t num_layers;
    if (!in.u32(num_layers)) return truncated("the layer count");
    if (num_layers == 0 || num_layers > bloom::kMaxLayers) {
        return core::Error{"layer count " + std::to_string(num_layers) + " not in [1, " +
                           std::to_string(bloom::kMaxLayers) + "]"};
    }
    if (out.options.nonscaling && num_layers != 1) {
        return core::Error{"nonscaling filter with " + std::to_string(num_layers) + " layers"};
    }
    out.layers.reserve(num_layers);
    out.items.reserve(num_layers);
    out.layer_words.reserve(num_layers);
    for (std::uint32_t i = 0; i < num_layers; ++i) {
        if (core::Status layer = parse_layer(in, i, out); !layer) return layer.failure();
    }
    if (in.left() != 0) {
        return core::Error{std::to_string(in.left()) + " bytes after the last layer"};
    }
    return out;
}

namespace {

// Stores `count` little-endian words from `bytes` at word `at` of `layer`,
// kWordChunk at a time through `words`.
void store_words(bloom::BloomLayer& layer, std::uint64_t at, std::uint64_t count,
                 std::string_view bytes, std::vector<std::uint64_t>& words) {
    for (std::uint64_t first = 0; first < count; first += format::kWordChunk) {
        const std::uint64_t left = count - first;
        const std::size_t n =
            left < format::kWordChunk ? static_cast<std::size_t>(left) : format::kWordChunk;
        words.resize(n);
        std::memcpy(words.data(), bytes.data() + first * 8, n * 8);
        format::words_little_to_host(words.data(), n);
        layer.store_words(at + first, n, words.data());
    }
}

// Stores the runs parse_runs() checked into a fresh (zeroed) layer: only
// the words they hold are written.
void store_runs(bloom::BloomLayer& layer, std::string_view runs,
                std::vector<std::uint64_t>& words) {
    Reader in(runs);
    for (std::uint64_t at = 0; in.left() != 0;) {
        std::uint64_t zeros = 0, count = 0;
        in.u64(zeros);
        in.u64(count);
        at += zeros;
        std::string_view bytes;
        in.bytes(count * 8, bytes);
        store_words(layer, at, count, bytes, words);
        at += count;
    }
}

}  // namespace

bloom::FilterRef build_dump_filter(const DumpValue& value, std::uint64_t maxmemory) {
    bloom::FilterRef filter = bloom::ScalableFilter::create(value.options, value.layers, maxmemory);
    if (!filter) return filter;
    std::vector<std::uint64_t> words;
    for (std::size_t i = 0; i < value.layers.size(); ++i) {
        bloom::BloomLayer& layer = filter->layer(i);
        layer.set_items(value.items[i]);
        const std::string_view bytes = value.layer_words[i];
        if (value.runs) {
            store_runs(layer, bytes, words);
            continue;
        }
        store_words(layer, 0, layer.num_words(), bytes, words);
    }
    return filter;
}

}  // namespace bloomery::persist
