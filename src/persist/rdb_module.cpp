// Module values in an RDB image: RedisBloom's Bloom filter value is what
// its BFRdbSave writes through the module serialization opcodes (RedisBloom
// src/rebloom.c), read as BFRdbLoad reads it; any other module's value but
// RedisBloom's Cuckoo filter (rdb_cuckoo.cpp) is read through its opcodes
// and skipped.

#include "rdb_module.hpp"

#include <cstring>
#include <limits>
#include <span>

#include "bloomery/bloom/bounds.hpp"
#include "bloomery/bloom/redisbloom.hpp"
#include "snapshot_format.hpp"

namespace bloomery::persist::rdb {

std::string module_type_name(std::uint64_t id) {
    static constexpr char kCharset[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    std::string name(9, ' ');
    std::uint64_t bits = id >> 10;
    for (int i = 8; i >= 0; --i) {
        name[static_cast<std::size_t>(i)] = kCharset[bits & 63];
        bits >>= 6;
    }
    return name;
}

void skip_module_fields(Cursor& in, const std::string& name) {
    for (;;) {
        const std::uint64_t at = in.offset();
        const std::uint64_t opcode = in.length("a module opcode");
        switch (opcode) {
            case kModuleEof:
                return;
            case kModuleSint:
            case kModuleUint:
                in.length("a module integer");
                break;
            case kModuleFloat:
                in.skip(4, "a module float");
                break;
            case kModuleDouble:
                in.skip(8, "a module double");
                break;
            case kModuleString:
                in.skip_string("a module string");
                break;
            default:
                in.fail(at, "unknown module opcode " + std::to_string(opcode) +
                                " in a value of module type '" + name + "'");
        }
    }
}

std::uint64_t ModuleFields::unsigned_field(const char* what) {
    expect(kModuleUint, what);
    return in_.length(what);
}

double ModuleFields::double_field(const char* what) {
    expect(kModuleDouble, what);
    return in_.f64(what);
}

std::string_view ModuleFields::string_field(const char* what, std::string& scratch) {
    expect(kModuleString, what);
    return in_.string_bytes(what, scratch);
}

void ModuleFields::end(const char* type) {
    const std::uint64_t at = in_.offset();
    if (in_.length("module value end") != kModuleEof) {
        in_.fail(at, std::string("the ") + type + " value does not end where it should");
    }
}

void ModuleFields::expect(std::uint64_t opcode, const char* what) {
    const std::uint64_t at = in_.offset();
    const std::uint64_t got = in_.length(what);
    if (got != opcode) {
        in_.fail(at, std::string("module opcode ") + std::to_string(got) + " where " + what +
                         " (opcode " + std::to_string(opcode) + ") was expected");
    }
}

// BFRdbLoad, encodings 0 to 4, checked as RedisBloom checks a loaded chain
// and then against bloomery's bounds before anything is allocated.
bloom::FilterRef BloomValueReader::read(std::uint64_t at, std::uint32_t encoding) {
    if (encoding > kBloomNewestEncoding) {
        in_.fail(at, "RedisBloom Bloom filter encoding " + std::to_string(encoding) +
                         " is newer than this reader knows (" +
                         std::to_string(kBloomNewestEncoding) + ")");
    }
    Fields fields(in_);
    Chain chain = read_chain(fields, at, encoding);
    // Built sub-filter by sub-filter as the value is read, each array
    // stored straight from the file (or from its decompressed copy): the
    // file's size bounds what is allocated before the value is checked.
    bloom::FilterRef filter;
    std::uint64_t total = 0;
    for (std::uint64_t i = 0; i < chain.links; ++i) {
        const Link link = read_link(fields, i, encoding);
        if (i == 0) {
            // RedisBloom keeps no requested rate or capacity: the first
            // sub-filter's say what they were (as for its dumps).
            bloom::FilterOptions& options = chain.options;
            options.capacity = link.geometry.capacity;
            options.error_rate =
                options.nonscaling ? link.geometry.error_rate : link.geometry.error_rate / 0.5;
            if (const bloom::BoundsError e = bloom::check_stored_options(options);
                e != bloom::BoundsError::none) {
                in_.fail(at, "Bloom filter is outside what bloomery keeps: " + bloom::describe(e));
            }
            filter = bloom::ScalableFilter::create(options, std::span(&link.geometry, 1));
        } else {
            filter->append_layer_for_load(link.geometry);
        }
        bloom::BloomLayer& target = filter->layer(i);
        store_words(target, link.array);
        std::string().swap(scratch_);
        const std::uint64_t items_at = in_.offset();
        const std::uint64_t items = fields.unsigned_field("a sub-filter's item count");
        if (items > bloom::kMaxLayerItems ||
            items > std::numeric_limits<std::uint64_t>::max() - total) {
            in_.fail(items_at, "Bloom filter sub-filter " + std::to_string(i) + " item count " +
                                   std::to_string(items) + " out of range");
        }
        target.set_items(items);
        total += items;
    }
    fields.end("Bloom filter");
    if (total != chain.size) {
        in_.fail(at, "Bloom filter item count " + std::to_string(chain.size) +
                         " is not the sum of its sub-filters' (" + std::to_string(total) + ")");
    }
    return filter;
}

BloomValueReader::Chain BloomValueReader::read_chain(Fields& fields, std::uint64_t at,
                                                     std::uint32_t encoding) {
    Chain chain;
    chain.size = fields.unsigned_field("the item count");
    const std::uint64_t count_at = in_.offset();
    chain.links = fields.unsigned_field("the sub-filter count");
    if (chain.links == 0) in_.fail(count_at, "Bloom filter without sub-filters");
    if (chain.links > bloom::kMaxLayers) {
        in_.fail(count_at, "Bloom filter of " + std::to_string(chain.links) +
                               " sub-filters, more than the " + std::to_string(bloom::kMaxLayers) +
                               " bloomery keeps");
    }
    std::uint64_t options = 0;
    std::uint64_t growth = 2;
    const std::uint64_t options_at = in_.offset();
    if (encoding >= 2) options = fields.unsigned_field("the options");
    if (encoding >= 4) growth = fields.unsigned_field("the expansion");
    if (options > std::numeric_limits<std::uint32_t>::max() ||
        growth > std::numeric_limits<std::uint32_t>::max()) {
        in_.fail(options_at, "Bloom filter options or expansion out of range");
    }
    bloom::FilterOptions& filter_options = chain.options;
    filter_options.scheme = bloom::HashScheme::redisbloom;
    filter_options.redisbloom_options = static_cast<std::uint32_t>(options);
    filter_options.nonscaling = (options & bloom::kRedisBloomNoScaling) != 0;
    filter_options.expansion = static_cast<std::uint32_t>(growth);
    if (filter_options.nonscaling && chain.links != 1) {
        in_.fail(at,
                 "NONSCALING Bloom filter with " + std::to_string(chain.links) + " sub-filters");
    }
    return chain;
}

BloomValueReader::Link BloomValueReader::read_link(Fields& fields, std::uint64_t index,
                                                   std::uint32_t encoding) {
    const std::uint64_t link_at = in_.offset();
    bloom::LayerGeometry layer;
    layer.scheme = bloom::HashScheme::redisbloom;
    layer.capacity = fields.unsigned_field("a sub-filter's entries");
    layer.error_rate = fields.double_field("a sub-filter's error rate");
    const std::uint64_t hashes = fields.unsigned_field("a sub-filter's hash count");
    layer.redisbloom_bpe = fields.double_field("a sub-filter's bits per entry");
    std::uint64_t bits = 0;
    std::uint64_t n2 = 0;
    if (encoding == 0) {
        const double wanted = static_cast<double>(layer.capacity) * layer.redisbloom_bpe;
        if (!(wanted >= 0 && wanted < 9.2e18)) in_.fail(link_at, "sub-filter size out of range");
        bits = static_cast<std::uint64_t>(wanted);
    } else {
        bits = fields.unsigned_field("a sub-filter's bit count");
        n2 = fields.unsigned_field("a sub-filter's n2");
    }
    const std::uint64_t array_at = in_.offset();
    const std::string_view array = fields.string_field("a sub-filter's bit array", scratch_);
    // BFRdbLoad: the array holds the bits, its length is the byte count;
    // then bloom_validate_integrity.
    const std::uint64_t bytes = array.size();
    if (hashes > std::numeric_limits<std::uint32_t>::max() || n2 > 63 || bytes < (bits + 7) / 8 ||
        bytes > std::numeric_limits<std::uint64_t>::max() / 8 || bits != bytes * 8 || bits == 0 ||
        (n2 != 0 && bits < (std::uint64_t{1} << n2)) || !(layer.error_rate > 0) ||
        !(layer.error_rate < 1.0) || bloom::redisbloom_hashes(layer.redisbloom_bpe) != hashes) {
        in_.fail(array_at, "Bloom filter sub-filter " + std::to_string(index) +
                               " fails RedisBloom's own checks (bits " + std::to_string(bits) +
                               ", bytes " + std::to_string(bytes) + ", hashes " +
                               std::to_string(hashes) + ")");
    }
    layer.bits = bits;
    layer.hashes = static_cast<std::uint32_t>(hashes);
    layer.redisbloom_n2 = static_cast<std::uint8_t>(n2);
    if (const bloom::BoundsError e = bloom::check_layer(layer, 0); e != bloom::BoundsError::none) {
        in_.fail(link_at, "Bloom filter sub-filter " + std::to_string(index) +
                              " is outside what bloomery keeps: " + bloom::describe(e));
    }
    return {layer, array};
}

void BloomValueReader::store_words(bloom::BloomLayer& target, std::string_view array) {
    for (std::uint64_t first = 0; first < target.num_words(); first += format::kWordChunk) {
        const std::uint64_t count =
            std::min<std::uint64_t>(format::kWordChunk, target.num_words() - first);
        words_.resize(count);
        std::memcpy(words_.data(), array.data() + first * 8, count * 8);
        format::words_little_to_host(words_.data(), count);
        target.store_words(first, count, words_.data());
    }
}

}  // namespace bloomery::persist::rdb
