// libFuzzer target: BF.LOADCHUNK payloads (bloom/dump.hpp) without the server.
//
// Input layout (what tests/fuzz/make_corpus.py writes from real SCANDUMPs):
//   u8  settings: bits 0-3 pick the chunk size of the re-dump (8 << n bytes),
//       bit 4 recomputes the header's checksum, bit 5 every chunk's, so the
//       fuzzer's changes reach the field checks behind them
//   u8  items to add after loading
//   records, each u32 iterator (little-endian), u16 length, bytes; the first
//   is the header, the others are chunks loaded at their iterator.
//
// Checked for every input:
//   - decode_header either fails with a message or yields a filter whose
//     header re-encodes to bytes that decode to the same geometry
//     (encode_header(decode_header(x)) is a fixed point);
//   - load_chunk either fails with a message and leaves the filter unchanged,
//     or succeeds;
//   - items added afterwards are all reported present;
//   - the filter then survives a full SCANDUMP-style copy: its header decodes
//     (whatever the server can grow into, it must be able to load), every
//     dump_chunk() loads, and the copy dumps identically.
// kMaxFilterBytes bounds the whole filter (every layer's bits together), so
// no header can allocate more than 64 KB of bits, whatever it claims.

#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bloomery/bloom/dump.hpp"
#include "bloomery/bloom/scalable_filter.hpp"

namespace {

using bloomery::bloom::AddResult;
using bloomery::bloom::ScalableFilter;

constexpr std::uint64_t kMaxFilterBytes = 64 * 1024;
// The unchanged-on-failure check copies the whole filter before every chunk;
// past this size it is skipped to keep executions fast.
constexpr std::size_t kMaxCompareBytes = 16 * 1024;

void require(bool condition, const char* what) {
    if (!condition) {
        std::fprintf(stderr, "loadchunk_fuzz invariant violated: %s\n", what);
        std::abort();
    }
}

void require_covered(const ScalableFilter& filter) {
    for (std::size_t i = 0; i < filter.num_layers(); ++i) {
        require(filter.layer(i).summary_covers_nonzero(),
                "a non-zero word outside the layer's touched regions");
    }
}

class Input {
public:
    Input(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
    bool empty() const { return pos_ >= size_; }
    std::uint64_t le(std::size_t bytes) {
        std::uint64_t v = 0;
        for (std::size_t i = 0; i < bytes; ++i) {
            v |= static_cast<std::uint64_t>(pos_ < size_ ? data_[pos_] : 0) << (8 * i);
            ++pos_;
        }
        return v;
    }
    std::string bytes(std::size_t want) {
        const std::size_t start = std::min(pos_, size_);
        const std::size_t n = std::min(want, size_ - start);
        pos_ = start + n;
        return std::string(reinterpret_cast<const char*>(data_) + start, n);
    }

private:
    const std::uint8_t* data_;
    std::size_t size_;
    std::size_t pos_ = 0;
};

void put_checksum(std::string& bytes, std::uint64_t sum) {
    std::memcpy(bytes.data() + bytes.size() - 8, &sum, 8);  // little-endian hosts only
}

// XXH64 (seed 0) over everything before the trailer, per proto/resp.md.
void fix_header_checksum(std::string& header) {
    if (header.size() < 8) return;
    put_checksum(header, XXH64(header.data(), header.size() - 8, 0));
}

// XXH64 (seed 0) over (u64 offset, payload); offset = iterator - 1 - payload length.
void fix_chunk_checksum(std::string& chunk, std::int64_t iter) {
    if (chunk.size() < 8) return;
    const std::size_t payload = chunk.size() - 8;
    const std::uint64_t offset = static_cast<std::uint64_t>(iter) - 1 - payload;
    std::string hashed(reinterpret_cast<const char*>(&offset), 8);
    hashed.append(chunk, 0, payload);
    put_checksum(chunk, XXH64(hashed.data(), hashed.size(), 0));
}

// The filter's whole dump (header and chunks), or "" once it passes `limit`.
std::string full_dump(const ScalableFilter& filter, std::size_t chunk_bytes, std::size_t limit) {
    std::string all;
    std::int64_t iter = 0;
    for (;;) {
        const bloomery::bloom::DumpChunk chunk =
            bloomery::bloom::dump_chunk(filter, iter, chunk_bytes);
        if (chunk.next_iter == 0) return all;
        all += std::to_string(chunk.next_iter);
        all += ':';
        all += chunk.data;
        if (all.size() > limit) return {};
        iter = chunk.next_iter;
    }
}

bloomery::bloom::FilterRef decode(std::string_view header) {
    auto filter = bloomery::bloom::decode_header(header, kMaxFilterBytes);
    if (!filter) {
        require(!filter.error().empty(), "decode_header failed without a message");
        return {};
    }
    require(*filter != nullptr, "decode_header succeeded without a filter");
    return *filter;
}

// encode_header(decode_header(x)) must decode again, to the same bytes.
void check_header_fixed_point(const ScalableFilter& filter) {
    const std::string header = bloomery::bloom::encode_header(filter);
    auto again = bloomery::bloom::decode_header(header, kMaxFilterBytes);
    if (!again) std::fprintf(stderr, "re-decode: %s\n", again.error().c_str());
    require(again.ok(), "a header encode_header wrote does not decode");
    require(bloomery::bloom::encode_header(**again) == header, "header round trip changed it");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    Input in(data, size);
    const auto settings = static_cast<std::uint8_t>(in.le(1));
    const std::size_t chunk_bytes = std::size_t{8} << (settings & 0x0f);
    const std::size_t items_to_add = in.le(1);

    in.le(4);  // the header's iterator (always 1)
    std::string header = in.bytes(in.le(2));
    if (settings & 0x10) fix_header_checksum(header);
    bloomery::bloom::FilterRef filter = decode(header);
    if (!filter) return 0;
    check_header_fixed_point(*filter);

    while (!in.empty()) {
        const auto iter = static_cast<std::int64_t>(static_cast<std::int32_t>(in.le(4)));
        std::string chunk = in.bytes(in.le(2));
        if (settings & 0x20) fix_chunk_checksum(chunk, iter);
        const std::string before =
            full_dump(*filter, bloomery::bloom::kMaxDumpChunkBytes, kMaxCompareBytes);
        if (const auto loaded = bloomery::bloom::load_chunk(*filter, iter, chunk); !loaded) {
            require(!loaded.error().empty(), "load_chunk failed without a message");
            if (!before.empty()) {
                require(full_dump(*filter, bloomery::bloom::kMaxDumpChunkBytes, kMaxCompareBytes) ==
                            before,
                        "a refused chunk changed the filter");
            }
        }
    }

    std::vector<std::string> added;
    for (std::size_t i = 0; i < items_to_add; ++i) {
        std::string item = "item" + std::to_string(i);
        const AddResult result =
            filter->add(item, bloomery::bloom::GrowthLimits{kMaxFilterBytes, 0});
        if (result != AddResult::added && result != AddResult::exists) break;
        added.push_back(std::move(item));
    }
    for (const std::string& item : added) {
        require(filter->contains(item), "false negative after add");
    }
    // Chunks and adds kept every non-zero word in a touched region (what
    // snapshots and DUMP read).
    require_covered(*filter);

    // The SCANDUMP / LOADCHUNK copy a client would make.
    check_header_fixed_point(*filter);
    bloomery::bloom::FilterRef copy = decode(bloomery::bloom::encode_header(*filter));
    require(copy != nullptr, "a filter's own header does not decode");
    for (std::int64_t iter = 1;;) {
        const bloomery::bloom::DumpChunk chunk =
            bloomery::bloom::dump_chunk(*filter, iter, chunk_bytes);
        if (chunk.next_iter == 0) break;
        if (const auto loaded = bloomery::bloom::load_chunk(*copy, chunk.next_iter, chunk.data);
            !loaded) {
            std::fprintf(stderr, "load_chunk: %s\n", loaded.error().c_str());
            require(false, "a chunk dump_chunk wrote does not load");
        }
        iter = chunk.next_iter;
    }
    for (const std::string& item : added) {
        require(copy->contains(item), "false negative in the copy");
    }
    require_covered(*copy);
    require(full_dump(*copy, chunk_bytes, SIZE_MAX) == full_dump(*filter, chunk_bytes, SIZE_MAX),
            "the copy dumps differently");
    return 0;
}
