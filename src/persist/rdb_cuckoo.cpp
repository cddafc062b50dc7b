// RedisBloom's Cuckoo filter value in an RDB image (`MBbloomCF`), as its
// CFRdbSave writes it through the module serialization opcodes and
// CFRdbLoad reads it (RedisBloom src/rebloom.c, src/cuckoo.h):
//   encoding 4:    numFilters, numBuckets, numItems, numDeletes, bucketSize,
//                  maxIterations, expansion (unsigned each), then per
//                  sub-filter its numBuckets and its slots (a string of
//                  numBuckets * bucketSize bytes);
//   encodings 0-3: numFilters, numBuckets, numItems, then per sub-filter
//                  its slots; no deletes, bucket size 2, 20 iterations,
//                  expansion 1, so every sub-filter has numBuckets buckets.
// The filter is built through CF.LOADCHUNK's own path (its 38-byte header,
// then each sub-filter's slots as a chunk), so it is refused where
// CF.LOADCHUNK would refuse it, and where RedisBloom's loader would trip
// its assertion (a sub-filter's size or slots that do not match).

#include <limits>
#include <string>

#include "bloomery/cuckoo/cuckoo_filter.hpp"
#include "rdb_module.hpp"

namespace bloomery::persist::rdb {
namespace {

// The fields CFRdbSave writes before the sub-filters.
struct CuckooHead {
    std::uint64_t filters = 0;
    std::uint64_t buckets = 0;
    std::uint64_t items = 0;
    std::uint64_t deletes = 0;
    std::uint64_t bucket_size = cuckoo::kDefaultBucketSize;
    std::uint64_t max_iterations = cuckoo::kDefaultMaxIterations;
    std::uint64_t expansion = cuckoo::kDefaultExpansion;
};

void put_le(std::string& out, std::uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// CF.SCANDUMP's header of a filter with `head`'s fields.
std::string header_of(const CuckooHead& head) {
    std::string out;
    out.reserve(cuckoo::kHeaderBytes);
    put_le(out, head.items, 8);
    put_le(out, head.buckets, 8);
    put_le(out, head.deletes, 8);
    put_le(out, head.filters, 8);
    put_le(out, head.bucket_size, 2);
    put_le(out, head.max_iterations, 2);
    put_le(out, head.expansion, 2);
    return out;
}

std::string describe(const CuckooHead& head) {
    return std::to_string(head.filters) + " sub-filters of " + std::to_string(head.buckets) +
           " buckets, bucket size " + std::to_string(head.bucket_size) + ", expansion " +
           std::to_string(head.expansion) + ", max iterations " +
           std::to_string(head.max_iterations) + ", " + std::to_string(head.items) + " items";
}

CuckooHead read_head(ModuleFields& fields, Cursor& in, std::uint32_t encoding) {
    CuckooHead head;
    head.filters = fields.unsigned_field("the sub-filter count");
    head.buckets = fields.unsigned_field("the bucket count");
    head.items = fields.unsigned_field("the item count");
    if (encoding >= kCuckooNewestEncoding) {
        head.deletes = fields.unsigned_field("the deletes count");
        const std::uint64_t at = in.offset();
        head.bucket_size = fields.unsigned_field("the bucket size");
        head.max_iterations = fields.unsigned_field("the max iterations");
        head.expansion = fields.unsigned_field("the expansion");
        // RedisBloom keeps these three in 16 bits.
        constexpr std::uint64_t kMax16 = std::numeric_limits<std::uint16_t>::max();
        if (head.bucket_size > kMax16 || head.max_iterations > kMax16 || head.expansion > kMax16) {
            in.fail(at, "Cuckoo filter bucket size, max iterations or expansion out of range (" +
                            describe(head) + ")");
        }
    }
    return head;
}

// The most bytes the rest of the image can hold as slots, decompressed:
// what the filter may allocate before its slots are read.
std::uint64_t slots_bound(const Cursor& in) {
    constexpr std::uint64_t kMax = cuckoo::kNoLimit - cuckoo::kMaxBookkeepingBytes;
    const std::uint64_t left = in.left();
    const std::uint64_t slots = left > kMax / kMaxLzfExpansion ? kMax : left * kMaxLzfExpansion;
    return slots + cuckoo::kMaxBookkeepingBytes;
}

// Sub-filter `index`'s stored size and slots, loaded into `filter` as the
// chunk that ends at `end` (CF.LOADCHUNK's iterator); returns the next end.
std::int64_t read_sub_filter(ModuleFields& fields, Cursor& in, cuckoo::CuckooFilter& filter,
                             std::uint16_t index, std::uint32_t encoding, std::int64_t end) {
    const std::uint64_t at = in.offset();
    const std::uint64_t want = filter.filter_buckets(index);
    if (encoding >= kCuckooNewestEncoding) {
        const std::uint64_t buckets = fields.unsigned_field("a sub-filter's bucket count");
        if (buckets != want) {
            in.fail(at, "Cuckoo filter sub-filter " + std::to_string(index) + " has " +
                            std::to_string(buckets) + " buckets where its place holds " +
                            std::to_string(want));
        }
    }
    std::string scratch;
    const std::uint64_t slots_at = in.offset();
    const std::string_view slots = fields.string_field("a sub-filter's slots", scratch);
    const std::uint64_t size = filter.filter_data(index).size();
    if (slots.size() != size) {
        in.fail(slots_at, "Cuckoo filter sub-filter " + std::to_string(index) + " holds " +
                              std::to_string(slots.size()) + " bytes of slots where it has " +
                              std::to_string(size));
    }
    end += static_cast<std::int64_t>(size);
    if (!filter.load_chunk(end, slots)) {
        in.fail(slots_at, "Cuckoo filter sub-filter " + std::to_string(index) + "'s slots refused");
    }
    return end;
}

}  // namespace

cuckoo::CuckooRef read_cuckoo_value(Cursor& in, std::uint64_t at, std::uint32_t encoding) {
    if (encoding > kCuckooNewestEncoding) {
        in.fail(at, "RedisBloom Cuckoo filter encoding " + std::to_string(encoding) +
                        " is newer than this reader knows (" +
                        std::to_string(kCuckooNewestEncoding) + ")");
    }
    ModuleFields fields(in);
    const CuckooHead head = read_head(fields, in, encoding);
    // CF.LOADCHUNK's checks: RedisBloom's integrity check, what no filter
    // it makes can have, slots enough for the items; and no more bytes than
    // the image can still hold.
    core::Result<cuckoo::CuckooFilter> filter =
        cuckoo::CuckooFilter::load_header(header_of(head), slots_bound(in));
    if (!filter) {
        in.fail(at,
                "Cuckoo filter fails RedisBloom's own checks or is larger than the file can "
                "hold (" +
                    describe(head) + ")");
    }
    std::int64_t end = 1;
    for (std::uint16_t i = 0; i < filter->num_filters(); ++i) {
        end = read_sub_filter(fields, in, *filter, i, encoding, end);
    }
    fields.end("Cuckoo filter");
    return cuckoo::CuckooObject::make(std::move(*filter));
}

}  // namespace bloomery::persist::rdb
