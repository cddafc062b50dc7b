#include "bloomery/core/file_io.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace bloomery::core {

int write_all(int fd, const void* data, std::size_t size) {
    const auto* next = static_cast<const char*>(data);
    while (size > 0) {
        const ssize_t n = ::write(fd, next, size);
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        // A regular file returns 0 only for a 0-byte write: an I/O error
        // rather than a reason to spin.
        if (n == 0) return EIO;
        next += n;
        size -= static_cast<std::size_t>(n);
    }
    return 0;
}

Status fsync_directory(const std::string& directory) {
    const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        return Error{"cannot open directory '" + directory +
                     "': " + std::generic_category().message(errno)};
    }
    int result;
    do {
        result = ::fsync(fd);
    } while (result != 0 && errno == EINTR);
    const int fsync_errno = errno;
    ::close(fd);
    if (result != 0) {
        return Error{"cannot fsync directory '" + directory +
                     "': " + std::generic_category().message(fsync_errno)};
    }
    return {};
}

}  // namespace bloomery::core
