#pragma once
// A file mapped read-only, whole: what the journal's readers and the RDB
// importer read from.

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <string>

#include "bloomery/core/result.hpp"
#include "snapshot_format.hpp"

namespace bloomery::persist {

// A whole regular file (a journal segment, an RDB file), mapped read-only.
class MappedFile {
public:
    MappedFile() = default;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    // Maps the file at `path`; or why not, naming it.
    core::Status open(const std::string& path) {
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) return core::Error{path + ": cannot open: " + format::errno_text(errno)};
        const auto give_up = [&](const char* what) {
            core::Error error{path + ": " + what + format::errno_text(errno)};
            ::close(fd);
            return error;
        };
        struct stat st {};
        if (::fstat(fd, &st) != 0) return give_up("cannot stat: ");
        if (!S_ISREG(st.st_mode)) {
            ::close(fd);
            return core::Error{path + ": not a regular file"};
        }
        size_ = static_cast<std::size_t>(st.st_size);
        if (size_ != 0) {
            void* data = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
            if (data == MAP_FAILED) return give_up("cannot map: ");
            ::madvise(data, size_, MADV_SEQUENTIAL);
            data_ = static_cast<const unsigned char*>(data);
        }
        ::close(fd);
        return {};
    }
    ~MappedFile() {
        if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), size_);
    }
    const unsigned char* data() const { return data_; }
    std::size_t size() const { return size_; }

private:
    const unsigned char* data_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace bloomery::persist
