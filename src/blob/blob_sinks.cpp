// blob_sinks.cpp — the memory and file-descriptor destinations for blob_write (the size counter is inline).
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "baton/base/buffer_pool.h"
#include "baton/blob.h"

namespace baton {

void blob_buffer_sink::size_hint(uint64_t total_bytes) {
    if (total_bytes > bytes_.max_size() - bytes_.size()) return;
    const size_t want = bytes_.size() + size_t(total_bytes);
    if (bytes_.empty() && bytes_.capacity() < want) bytes_ = buffer_pool::shared().take(want);
    else bytes_.reserve(want);
}

Status blob_buffer_sink::write(const void * data, size_t n) {
    const auto * p = static_cast<const uint8_t *>(data);
    bytes_.insert(bytes_.end(), p, p + n);
    return {};
}

// Loops over short writes and EINTR, so a socket or pipe receives every byte or the call fails.
Status blob_fd_sink::write(const void * data, size_t n) {
    const auto * p = static_cast<const uint8_t *>(data);
    while (n > 0) {
        const ssize_t k = ::write(fd_, p, n);
        if (k < 0) {
            if (errno == EINTR) continue;
            return Status(status_code::io_error, std::string("blob: write to fd ") + std::to_string(fd_) +
                                                     " failed: " + std::strerror(errno));
        }
        if (k == 0) return Status(status_code::io_error, "blob: write to fd " + std::to_string(fd_) + " wrote nothing");
        p += k;
        n -= size_t(k);
    }
    return {};
}

}  // namespace baton
