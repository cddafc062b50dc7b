// libFuzzer target: arbitrary bytes as the records of a journal segment (a
// valid 40-byte segment header is put in front, so the fuzzer spends its time
// on records). Replay and --check-journal must answer true/false without
// crashing, leaking or allocating without bound, and name a reason on false.
// Replay may legitimately reserve large filters (a CREATE record of a huge
// filter is a few bytes, as BF.RESERVE is): their bits are mapped lazily, so
// only bytes actually written (CHUNK records, bounded by the input) count
// against libFuzzer's -rss_limit_mb.
//
// Files go to a private directory under /dev/shm (else $TMPDIR or /tmp),
// rewritten for every input.
// Seeds: tests/fuzz/make_journal_corpus.py.

#include <unistd.h>
#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "bloomery/persist/journal_reader.hpp"

namespace {

std::string fuzz_directory() {
    static const std::string directory = [] {
        std::string base = "/dev/shm";
        if (!std::filesystem::is_directory(base)) {
            const char* tmp = std::getenv("TMPDIR");
            base = tmp != nullptr ? tmp : "/tmp";
        }
        std::string pattern = base + "/journal_fuzz.XXXXXX";
        if (::mkdtemp(pattern.data()) == nullptr) std::abort();
        return pattern;
    }();
    return directory;
}

void put_u64(unsigned char* out, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) out[i] = static_cast<unsigned char>(v >> (8 * i));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string directory = fuzz_directory();
    const std::string path = directory + "/journal.00000000000000000000";
    unsigned char header[40] = {'B', 'L', 'O', 'O', 'M', 'J', 'N', 'L', 1, 0, 0, 0, 0, 0, 0, 0};
    put_u64(header + 16, 1);  // journal id
    put_u64(header + 24, 0);  // start offset
    put_u64(header + 32, XXH64(header, 32, 0));
    {
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(header), sizeof header);
        out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
        if (!out) std::abort();
    }
    {
        const bloomery::persist::JournalCheckReport checked =
            bloomery::persist::check_journal(path, bloomery::persist::JournalRepair::none);
        const bool valid = checked.verdict == bloomery::persist::JournalCheck::valid;
        if (!valid && checked.problem.empty()) std::abort();
    }
    {
        bloomery::store::Keyspace keyspace(4);
        const bloomery::core::Result<bloomery::persist::ReplayStats> replayed =
            bloomery::persist::replay_journal(directory, "journal", std::nullopt, keyspace);
        if (!replayed && replayed.error().empty()) std::abort();
        if (replayed && replayed->id != 1) std::abort();
    }
    std::filesystem::remove(path);
    return 0;
}
