#include "bloomery/core/allocator.hpp"

#include <malloc.h>

#include <cstddef>
#include <cstring>

// jemalloc's control interface. Weak: when the binary is not linked with
// jemalloc (unit tests, sanitizer builds) the symbol is null and the C
// library's figures are used instead. Debian's jemalloc exports it unprefixed.
extern "C" int mallctl(const char* name, void* old_value, std::size_t* old_length, void* new_value,
                       std::size_t new_length) __attribute__((weak));

extern "C" void malloc_stats_print(void (*write)(void*, const char*), void* opaque,
                                   const char* options) __attribute__((weak));

namespace bloomery::core {
namespace {

bool have_jemalloc() {
    return mallctl != nullptr;
}

std::uint64_t read_size(const char* name) {
    std::size_t value = 0;
    std::size_t length = sizeof value;
    if (mallctl(name, &value, &length, nullptr, 0) != 0) return 0;
    return value;
}

}  // namespace

std::string allocator_name() {
    if (!have_jemalloc()) return "libc";
    const char* version = nullptr;
    std::size_t length = sizeof version;
    if (mallctl("version", &version, &length, nullptr, 0) != 0 || version == nullptr) {
        return "jemalloc";
    }
    // "5.3.0-0-g54eaed1d..." -> "jemalloc-5.3.0", as Redis shows it.
    const char* dash = std::strchr(version, '-');
    return "jemalloc-" + (dash ? std::string(version, dash) : std::string(version));
}

AllocatorStats allocator_stats() {
    AllocatorStats stats;
    if (have_jemalloc()) {
        std::uint64_t epoch = 1;
        std::size_t length = sizeof epoch;
        mallctl("epoch", &epoch, &length, &epoch, length);
        stats.allocated = read_size("stats.allocated");
        stats.active = read_size("stats.active");
        stats.resident = read_size("stats.resident");
        return stats;
    }
    const struct mallinfo2 info = ::mallinfo2();
    stats.allocated = info.uordblks + info.hblkhd;
    stats.active = info.arena + info.hblkhd;
    stats.resident = stats.active;
    return stats;
}

std::string allocator_stats_text() {
    if (!have_jemalloc() || malloc_stats_print == nullptr) return {};
    std::string text;
    malloc_stats_print(
        [](void* opaque, const char* piece) { static_cast<std::string*>(opaque)->append(piece); },
        &text, nullptr);
    return text;
}

void allocator_release_free_memory() {
    if (have_jemalloc()) {
        // MALLCTL_ARENAS_ALL (4096): purge the dirty pages of every arena.
        mallctl("arena.4096.purge", nullptr, nullptr, nullptr, 0);
        return;
    }
    ::malloc_trim(0);
}

void allocator_configure() {
    if (!have_jemalloc()) return;
    bool enable = true;
    mallctl("background_thread", nullptr, nullptr, &enable, sizeof enable);
}

}  // namespace bloomery::core
