// file.h: POSIX file helpers every layer shares: an owned descriptor, reads and writes that
// retry EINTR and short transfers, whole-file reads, and the one atomic file replacement
// (temporary file + fsync + rename + directory fsync) that every writer of a whole file uses.
//
// Errors are channel::Error with one line: "[what: ]FILE: cannot OP: strerror".
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace channel {

// A file descriptor closed on destruction. Move-only.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);
  // Closes now and reports close()'s result (0, or -1 with errno: a delayed write error).
  int close();

 private:
  int fd_ = -1;
};

// The low-level transfers return false (or -1) with errno set; EINTR is retried and short
// transfers go on where they stopped.
bool write_all(int fd, const void* data, size_t n);
bool pwrite_all(int fd, const void* data, size_t n, uint64_t offset);
// Reads until n bytes or end of file; returns the bytes read, or -1.
ssize_t read_full(int fd, void* data, size_t n);
ssize_t pread_full(int fd, void* data, size_t n, uint64_t offset);
// preadv until every byte of iov[0, k) is read or the file ends; returns the bytes read, or
// -1. The iovecs are consumed (advanced past what was read).
ssize_t preadv_full(int fd, iovec* iov, int k, uint64_t offset);

// Throws "[what: ]path: cannot OP: strerror(errno)".
[[noreturn]] void throw_file_error(std::string_view what, std::string_view path,
                                   std::string_view op);

// The whole of a regular file (an error for anything else).
std::vector<uint8_t> read_file(const std::string& path, std::string_view what = {});

struct AtomicWriteOptions {
  std::string_view what;  // error prefix ("gguf writer", "episodic"), may be empty
  bool replace = true;    // false: never replace an existing file (link(2), EEXIST is an error)
  bool durable = true;    // fsync the file before it appears and the directory after
  mode_t mode = 0644;
};

// Creates `path` atomically: `fill` writes the content through the descriptor of a new
// temporary file beside it (`path`.tmp.PID.N, created exclusively); the file is then fsynced,
// closed (a close error counts), renamed over `path` (or linked, without `replace`) and the
// directory fsynced. Readers see the old file or the new one, never a part. On any error,
// including one thrown by `fill`, the temporary file is removed and `path` is untouched.
void atomic_write(const std::string& path, const std::function<void(int fd)>& fill,
                  const AtomicWriteOptions& options = {});
void atomic_write(const std::string& path, std::span<const uint8_t> bytes,
                  const AtomicWriteOptions& options = {});

}  // namespace channel
