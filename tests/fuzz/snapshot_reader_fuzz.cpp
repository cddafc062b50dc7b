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
    }
    {
        const bloomery::persist::SnapshotCheck checked = bloomery::persist::check_snapshot(path);
        if (!checked.verdict && checked.verdict.error().empty()) std::abort();
    }
    ::close(fd);
    return 0;
}
