// libFuzzer target: Cuckoo filters without the server: CF.LOADCHUNK
// payloads (RedisBloom's header and chunks), then inserts, deletes and
// compactions on what was loaded, each redone from its record.
//
// Input layout (tests/fuzz/make_corpus.py writes seeds from real dumps):
//   38 bytes   a CF.SCANDUMP header (CF.LOADCHUNK key 1)
//   u8 n       chunks, each u32 iterator (little-endian), u16 length, bytes
//   the rest   operations, one byte each: the low 2 bits pick insert,
//              insert-unique, delete or compact, the high 6 bits the item.
//
// Checked for every input:
//   - load_header fails with a message or makes a filter within the bound;
//     a chunk that does not load leaves the filter unchanged;
//   - every change redone from its record (apply()) on a copy of the filter
//     as it was before gives the same bytes, so a journal replays exactly;
//   - an item inserted and not deleted since answers present;
//   - the filter survives CF.SCANDUMP / CF.LOADCHUNK and a DUMP payload
//     byte for byte (unless its counts claim more items than it has slots).
// kMaxBytes bounds every filter, so no header can make more than 16 KB of
// slots, whatever it claims.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>

#include "bloomery/cuckoo/cuckoo_filter.hpp"
#include "bloomery/persist/dump_payload.hpp"

namespace {

using bloomery::cuckoo::CuckooFilter;

constexpr std::uint64_t kMaxBytes = 16 * 1024;

void require(bool condition, const char* what) {
    if (!condition) {
        std::fprintf(stderr, "cuckoo_fuzz invariant violated: %s\n", what);
        std::abort();
    }
}

// Every byte that makes the filter: header and slots.
std::string bytes_of(const CuckooFilter& filter) {
    return bloomery::persist::cuckoo_dump_payload(filter);
}

// The same header and slots, compared in place (no payload, no checksum).
bool same(const CuckooFilter& a, const CuckooFilter& b) {
    if (a.header() != b.header()) return false;
    for (std::uint16_t i = 0; i < a.num_filters(); ++i) {
        if (a.filter_data(i) != b.filter_data(i)) return false;
    }
    return true;
}

// Operations after the chunks: enough to grow, relocate and compact a
// small filter, few enough that each input runs fast.
constexpr std::size_t kMaxOperations = 96;

// The filter rebuilt from its own CF.SCANDUMP chunks.
void check_scandump_round_trip(const CuckooFilter& filter) {
    if (filter.num_items() == 0) return;  // RedisBloom dumps nothing then
    // A loaded header may claim items its slots do not hold; adds then count
    // past the slots, and that header is one no loader takes (RedisBloom's
    // check refuses it too).
    if (filter.num_items() > filter.capacity()) return;
    const bloomery::cuckoo::DumpChunk head = filter.scandump(0);
    bloomery::core::Result<CuckooFilter> copy = CuckooFilter::load_header(
        head.data, filter.bytes() + bloomery::cuckoo::kMaxBookkeepingBytes);
    require(copy.ok(), "a filter's own header loads");
    for (std::int64_t pos = head.next;;) {
        const bloomery::cuckoo::DumpChunk chunk = filter.scandump(pos, 1000);
        if (chunk.next == 0) break;
        require(copy->load_chunk(chunk.next, chunk.data), "a filter's own chunk loads");
        pos = chunk.next;
    }
    require(same(*copy, filter), "SCANDUMP round trip");
    const std::string payload = bytes_of(filter);
    bloomery::core::Result<CuckooFilter> restored =
        bloomery::persist::parse_dump_cuckoo(payload, bloomery::cuckoo::kNoLimit);
    require(restored.ok() && bytes_of(*restored) == payload, "DUMP payload round trip");
}

// Runs the operations, checking each change against its record.
void run_operations(CuckooFilter& filter, const std::uint8_t* data, std::size_t size) {
    std::map<int, int> present;  // item -> adds not deleted yet
    for (std::size_t i = 0; i < size && i < kMaxOperations; ++i) {
        const int item = data[i] >> 2;
        const std::uint64_t hash = bloomery::cuckoo::cuckoo_hash("item" + std::to_string(item));
        CuckooFilter before = filter;
        switch (data[i] & 3) {
            case 0:
            case 1: {
                const bloomery::cuckoo::InsertRecord record =
                    (data[i] & 3) == 0 ? filter.insert(hash, kMaxBytes)
                                       : filter.insert_unique(hash, kMaxBytes);
                if (record.status == bloomery::cuckoo::InsertStatus::inserted) ++present[item];
                require(before.apply(record), "an insert's record applies");
                break;
            }
            case 2: {
                // Only what was added: deleting an item never added may take
                // another's fingerprint (a false negative by design).
                if (present[item] == 0) continue;
                const bloomery::cuckoo::DeleteRecord record = filter.remove(hash);
                require(record.deleted, "an added item is found to delete");
                --present[item];
                require(before.apply(record), "a delete's record applies");
                break;
            }
            default:
                filter.compact(true);
                before.compact(true);
                break;
        }
        require(same(before, filter), "a change redone from its record");
    }
    for (const auto& [item, count] : present) {
        if (count == 0) continue;
        const std::uint64_t hash = bloomery::cuckoo::cuckoo_hash("item" + std::to_string(item));
        require(filter.exists(hash), "an inserted item answers present");
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < bloomery::cuckoo::kHeaderBytes + 1) return 0;
    const std::string_view header(reinterpret_cast<const char*>(data),
                                  bloomery::cuckoo::kHeaderBytes);
    bloomery::core::Result<CuckooFilter> filter = CuckooFilter::load_header(header, kMaxBytes);
    if (!filter) {
        require(!filter.error().empty(), "a refused header says why");
        return 0;
    }
    require(filter->capacity() <= kMaxBytes, "a loaded header stays within the bound");
    std::size_t at = bloomery::cuckoo::kHeaderBytes;
    const unsigned chunks = data[at++];
    for (unsigned c = 0; c < chunks && at + 6 <= size; ++c) {
        const std::uint32_t pos = data[at] | (data[at + 1] << 8) | (data[at + 2] << 16) |
                                  (static_cast<std::uint32_t>(data[at + 3]) << 24);
        std::size_t length = data[at + 4] | (data[at + 5] << 8);
        at += 6;
        if (length > size - at) length = size - at;
        const CuckooFilter before = *filter;
        const std::string_view chunk(reinterpret_cast<const char*>(data + at), length);
        at += length;
        if (!filter->load_chunk(pos, chunk)) {
            require(same(*filter, before), "a refused chunk changes nothing");
        }
    }
    check_scandump_round_trip(*filter);
    run_operations(*filter, data + at, size - at);
    check_scandump_round_trip(*filter);
    return 0;
}
