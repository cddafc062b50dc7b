// libFuzzer target: arbitrary bytes as a snapshot file. Both the loader and the
// checker must answer true/false without crashing, leaking, or allocating more
// than the input's size (libFuzzer's -rss_limit_mb catches the last one), and
// a failed load must leave the keyspace empty.
//
// The reader's API takes a path, so the input goes into an in-memory file
// (memfd) opened through /proc/self/fd: no disk traffic per input.
//
// Build: clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude
//   tests/fuzz/snapshot_reader_fuzz.cpp src/persist/snapshot_*.cpp
//   src/store/*.cpp src/bloom/*.cpp -lmurmurhash -lxxhash -pthread
// Seeds: files written by save_snapshot() (see tests/unit/snapshot_test.cpp).

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "bloomery/persist/snapshot.hpp"
#include "bloomery/store/keyspace_view.hpp"

namespace {

// Every non-zero word a load wrote lies in a touched region of its layer
// (what snapshots and DUMP read). Layers up to 16 MiB: a hostile file may
// describe an empty layer of gigabytes, which would take long to scan.
void require_covered(const bloomery::store::Keyspace& keyspace) {
    constexpr std::uint64_t kMaxScannedBytes = std::uint64_t{16} << 20;
    const bloomery::store::KeyspaceView view = keyspace.view(bloomery::store::ViewFor::keys);
    for (std::size_t i = 0; i < view.size(); ++i) {
        const bloomery::store::KeyspaceView::Entry& entry = view.entry(i);
        // Only plain filters keep touched regions.
        const bloomery::bloom::ScalableFilter* plain = entry.value.bloom_or_null();
        if (plain == nullptr) continue;
        const bloomery::bloom::ScalableFilter& filter = *plain;
        for (std::size_t l = 0; l < filter.num_layers(); ++l) {
            const bloomery::bloom::BloomLayer& layer = filter.layer(l);
            if (layer.byte_size() <= kMaxScannedBytes && !layer.summary_covers_nonzero()) {
                std::abort();
            }
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const int fd = ::memfd_create("snapshot_fuzz", MFD_CLOEXEC);
    if (fd < 0) std::abort();
    std::size_t written = 0;
    while (written < size) {
        const ssize_t n = ::write(fd, data + written, size - written);
        if (n <= 0) std::abort();
        written += static_cast<std::size_t>(n);
    }
    const std::string path = "/proc/self/fd/" + std::to_string(fd);

    {
        bloomery::store::Keyspace keyspace(4);
        const bloomery::core::Result<bloomery::persist::LoadStats> loaded =
            bloomery::persist::load_snapshot(path, keyspace);
        if (!loaded && (keyspace.size() != 0 || loaded.error().empty())) std::abort();
        if (loaded && keyspace.size() != loaded->keys) std::abort();
        if (loaded) require_covered(keyspace);
    }
    {
        const bloomery::persist::SnapshotCheck checked = bloomery::persist::check_snapshot(path);
        if (!checked.verdict && checked.verdict.error().empty()) std::abort();
    }
    ::close(fd);
    return 0;
}
