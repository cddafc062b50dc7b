#pragma once
// A directory of its own for one test, under $TMPDIR (else /tmp), removed
// with everything in it when the test ends.

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace bloomery::testing {

class ScratchDir {
public:
    // `prefix` names the directory (PREFIX.XXXXXX), so a leftover tells
    // which test made it.
    explicit ScratchDir(std::string_view prefix) {
        const char* base = std::getenv("TMPDIR");
        std::string pattern =
            std::string(base ? base : "/tmp") + "/" + std::string(prefix) + ".XXXXXX";
        if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
        path_ = pattern;
    }
    ~ScratchDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
    }
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;

    const std::filesystem::path& path() const { return path_; }
    std::string str() const { return path_.string(); }

private:
    std::filesystem::path path_;
};

}  // namespace bloomery::testing
