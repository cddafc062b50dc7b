// libFuzzer target: arbitrary bytes as a Redis RDB file for `bloomery
// --import-rdb` (persist/rdb_import.hpp).
//
// Checked for every input:
//   - read_rdb succeeds, or fails with a reason that names the offset;
//   - nothing it allocates is much larger than the input (libFuzzer's
//     -rss_limit_mb catches that): sizes are checked against the bytes left
//     before anything is allocated;
//   - every Bloom filter it hands over is a valid RedisBloom-scheme filter:
//     its header decodes again to the same bytes, and its whole dump loads
//     into that copy and dumps identically (what the snapshot and the server
//     do with it later);
//   - every Cuckoo filter it hands over dumps by CF.SCANDUMP chunks that
//     load back to the same header and slots, and the counts of both kinds
//     match what it handed over.
//
// Seeds: tests/fuzz/make_rdb_corpus.py (from RedisBloom's own RDB files in
// tests/fixtures/redisbloom and hand-built values of every type).

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>

#include "bloomery/bloom/dump.hpp"
#include "bloomery/cuckoo/cuckoo_object.hpp"
#include "bloomery/persist/rdb_import.hpp"

namespace {

void require(bool condition, const char* what) {
    if (!condition) {
        std::fprintf(stderr, "rdb_reader_fuzz invariant violated: %s\n", what);
        std::abort();
    }
}

void check_filter(const bloomery::bloom::ScalableFilter& filter) {
    require(filter.scheme() == bloomery::bloom::HashScheme::redisbloom, "not RedisBloom's scheme");
    const std::string header = bloomery::bloom::encode_header(filter);
    auto decoded = bloomery::bloom::decode_header(header, 0);
    require(decoded.ok(), "an imported filter's header does not decode");
    bloomery::bloom::FilterRef copy = *decoded;
    require(bloomery::bloom::encode_header(*copy) == header, "header round trip changed it");
    std::int64_t iter = 1;
    std::string original, copied;
    for (;;) {
        const bloomery::bloom::DumpChunk chunk = bloomery::bloom::dump_chunk(filter, iter);
        if (chunk.next_iter == 0) break;
        require(bloomery::bloom::load_chunk(*copy, chunk.next_iter, chunk.data).ok(),
                "a chunk of an imported filter does not load");
        original += chunk.data;
        iter = chunk.next_iter;
    }
    for (iter = 1;;) {
        const bloomery::bloom::DumpChunk chunk = bloomery::bloom::dump_chunk(*copy, iter);
        if (chunk.next_iter == 0) break;
        copied += chunk.data;
        iter = chunk.next_iter;
    }
    require(original == copied, "an imported filter's copy dumps differently");
}

// A Cuckoo filter it built dumps (CF.SCANDUMP) and loads (CF.LOADCHUNK)
// back to the same header and slots.
void check_cuckoo(const bloomery::cuckoo::CuckooFilter& filter) {
    if (filter.num_items() == 0 || filter.num_items() > filter.capacity()) return;
    const bloomery::cuckoo::DumpChunk head = filter.scandump(0);
    bloomery::core::Result<bloomery::cuckoo::CuckooFilter> copy =
        bloomery::cuckoo::CuckooFilter::load_header(
            head.data, filter.bytes() + bloomery::cuckoo::kMaxBookkeepingBytes);
    require(copy.ok(), "an imported Cuckoo filter's header does not load");
    for (std::int64_t pos = head.next;;) {
        const bloomery::cuckoo::DumpChunk chunk = filter.scandump(pos);
        if (chunk.next == 0) break;
        require(copy->load_chunk(chunk.next, chunk.data),
                "a chunk of an imported Cuckoo filter does not load");
        pos = chunk.next;
    }
    require(copy->header() == filter.header(), "an imported Cuckoo filter's copy differs");
    for (std::uint16_t i = 0; i < filter.num_filters(); ++i) {
        require(copy->filter_data(i) == filter.filter_data(i),
                "an imported Cuckoo filter's copy differs");
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::size_t filters = 0;
    const bloomery::persist::RdbFilterSink sink =
        [&](std::string, bloomery::bloom::FilterRef filter, std::int64_t) {
            check_filter(*filter);
            ++filters;
        };
    std::size_t cuckoos = 0;
    const bloomery::persist::RdbCuckooSink cuckoo_sink =
        [&](std::string, bloomery::cuckoo::CuckooRef filter, std::int64_t) {
            check_cuckoo(filter->lock().filter());
            ++cuckoos;
        };
    const bloomery::persist::RdbWarningSink warn = [](const std::string& warning) {
        require(!warning.empty(), "an empty warning");
    };
    // A fixed "now" (2023-11-14), so what counts as expired does not change
    // between runs of one input.
    const bloomery::core::Result<bloomery::persist::RdbImportStats> stats =
        bloomery::persist::read_rdb(std::span(data, size), 1700000000000, sink, warn, cuckoo_sink);
    if (!stats) {
        const std::string& error = stats.error();
        require(!error.empty(), "refused without a reason");
        require(error.rfind("offset ", 0) == 0 || error.rfind("out of memory", 0) == 0,
                "a refusal that names no offset");
    } else {
        require(filters == stats->filters, "filters handed over do not match the count");
        require(cuckoos == stats->cuckoo_filters,
                "Cuckoo filters handed over do not match the count");
    }
    return 0;
}
