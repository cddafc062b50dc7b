// CF.SCANDUMP / CF.LOADCHUNK in RedisBloom's format. The header is its packed
// CFHeader, little-endian: u64 numItems, u64 numBuckets, u64 numDeletes,
// u64 numFilters, u16 bucketSize, u16 maxIterations, u16 expansion (38
// bytes). The data follows as the sub-filters' slots, oldest first, each
// sub-filter in one chunk if it fits the chunk limit, else in pieces of the
// limit; a chunk's iterator is 1 + the byte offset of its end in the
// concatenated slots.
#include <cstring>
#include <limits>

#include "bloomery/cuckoo/cuckoo_filter.hpp"

namespace bloomery::cuckoo {
namespace {

void put_le(std::string& out, std::uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

std::uint64_t get_le(std::string_view in, std::size_t at, int bytes) {
    std::uint64_t value = 0;
    for (int i = 0; i < bytes; ++i) {
        value |= std::uint64_t{static_cast<unsigned char>(in[at + i])} << (8 * i);
    }
    return value;
}

bool is_power_of_two(std::uint64_t n) {
    return n != 0 && (n & (n - 1)) == 0;
}

struct Header {
    std::uint64_t items = 0;
    std::uint64_t buckets = 0;
    std::uint64_t deletes = 0;
    std::uint64_t filters = 0;
    std::uint64_t bucket_size = 0;
    std::uint64_t max_iterations = 0;
    std::uint64_t expansion = 0;
};

Header parse(std::string_view blob) {
    return Header{get_le(blob, 0, 8),  get_le(blob, 8, 8),  get_le(blob, 16, 8),
                  get_le(blob, 24, 8), get_le(blob, 32, 2), get_le(blob, 34, 2),
                  get_le(blob, 36, 2)};
}

// What RedisBloom's integrity check refuses, and what no filter it makes
// can have (more sub-filters than 16 bits count, an expansion that is not
// a power of two, a sub-filter past 56 bits of buckets).
bool acceptable(const Header& h) {
    if (h.bucket_size == 0 || h.bucket_size > kMaxBucketSize) return false;
    if (!is_power_of_two(h.buckets) || h.buckets > kMaxNumBuckets) return false;
    if (h.filters == 0 || h.filters > kMaxFilters || h.max_iterations == 0) return false;
    if (h.expansion > kMaxExpansion) return false;
    if (h.expansion == 0) return h.filters == 1;
    return is_power_of_two(h.expansion);
}

}  // namespace

std::string CuckooFilter::header() const {
    std::string out;
    out.reserve(kHeaderBytes);
    put_le(out, num_items_, 8);
    put_le(out, num_buckets_, 8);
    put_le(out, num_deletes_, 8);
    put_le(out, filters_.size(), 8);
    put_le(out, bucket_size_, 2);
    put_le(out, max_iterations_, 2);
    put_le(out, expansion_, 2);
    return out;
}

DumpChunk CuckooFilter::scandump(std::int64_t pos, std::size_t chunk_limit) const {
    if (num_items_ == 0 || pos < 0 || chunk_limit == 0) return {};
    if (pos == 0) return DumpChunk{1, header()};
    auto offset = static_cast<std::uint64_t>(pos - 1);
    std::size_t i = 0;
    for (; i < filters_.size(); ++i) {
        if (offset < filters_[i].data.size()) break;
        offset -= filters_[i].data.size();
    }
    if (i == filters_.size()) return {};
    const std::vector<std::uint8_t>& data = filters_[i].data;
    std::uint64_t length = data.size() - offset;
    // RedisBloom sends a sub-filter that fits the limit whole, from its start.
    if (data.size() <= chunk_limit) {
        offset = 0;
        length = data.size();
    } else if (length > chunk_limit) {
        length = chunk_limit;
    }
    const auto* start = reinterpret_cast<const char*>(data.data()) + offset;
    return DumpChunk{pos + static_cast<std::int64_t>(length), std::string(start, length)};
}

core::Result<CuckooFilter> CuckooFilter::load_header(std::string_view blob,
                                                     std::uint64_t max_bytes) {
    if (blob.size() != kHeaderBytes) return core::Error{"Invalid header"};
    const Header h = parse(blob);
    const core::Error refused{"Couldn't create filter!"};
    if (!acceptable(h)) return refused;
    CuckooFilter filter;
    filter.num_items_ = h.items;
    filter.num_buckets_ = h.buckets;
    filter.num_deletes_ = h.deletes;
    filter.bucket_size_ = static_cast<std::uint16_t>(h.bucket_size);
    filter.max_iterations_ = static_cast<std::uint16_t>(h.max_iterations);
    filter.expansion_ = static_cast<std::uint16_t>(h.expansion);
    // Sizes first, so that nothing is allocated for a header that asks too much.
    std::uint64_t total = 0;
    for (std::uint64_t i = 0; i < h.filters; ++i) {
        std::uint64_t buckets = 0;
        if (!filter.sub_filter_buckets(i, buckets)) return refused;
        if (buckets > max_bytes / h.bucket_size) return refused;
        total += buckets * h.bucket_size;
        if (total > max_bytes) return refused;
    }
    if (h.items > total) return refused;
    filter.filters_.reserve(h.filters);
    for (std::uint64_t i = 0; i < h.filters; ++i) {
        if (!filter.grow(max_bytes)) return refused;
    }
    return filter;
}

bool CuckooFilter::load_chunk(std::int64_t pos, std::string_view data) {
    if (data.empty() || pos <= 1 || static_cast<std::uint64_t>(pos - 1) < data.size()) {
        return false;
    }
    std::uint64_t offset = static_cast<std::uint64_t>(pos - 1) - data.size();
    for (SubFilter& f : filters_) {
        if (offset < f.data.size()) {
            if (data.size() > f.data.size() - offset) return false;
            std::memcpy(f.data.data() + offset, data.data(), data.size());
            return true;
        }
        offset -= f.data.size();
    }
    return false;
}

}  // namespace bloomery::cuckoo
