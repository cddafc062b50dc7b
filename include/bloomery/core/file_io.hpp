#pragma once
// The two POSIX steps every durable file write here takes, written once:
// writing a whole buffer to a descriptor, and making a directory's entries
// (a file created, renamed or removed in it) survive a power loss.

#include <cstddef>
#include <string>

#include "bloomery/core/result.hpp"

namespace bloomery::core {

// Writes every byte of [data, data + size) to `fd`, retrying after EINTR and
// short writes. Returns 0 once all are written, else the errno of the failure
// (EIO for a write that wrote nothing without saying why).
int write_all(int fd, const void* data, std::size_t size);

// fsync of `directory` (retried after EINTR). Fails, naming the directory
// and the errno text, if it cannot be opened or synced.
Status fsync_directory(const std::string& directory);

}  // namespace bloomery::core
