// file.h: EINTR-safe transfers, whole-file reads and the atomic file replacement.
#include "util/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "util/error.h"

namespace channel {

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) reset(o.release());
  return *this;
}

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

int UniqueFd::close() {
  const int fd = release();
  return fd >= 0 ? ::close(fd) : 0;
}

bool write_all(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return false;
    if (w == 0) {
      errno = EIO;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool pwrite_all(int fd, const void* data, size_t n, uint64_t offset) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return false;
    if (w == 0) {
      errno = EIO;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
    offset += static_cast<uint64_t>(w);
  }
  return true;
}

ssize_t read_full(int fd, void* data, size_t n) {
  auto* p = static_cast<uint8_t*>(data);
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::read(fd, p + done, n - done);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  return static_cast<ssize_t>(done);
}

ssize_t pread_full(int fd, void* data, size_t n, uint64_t offset) {
  auto* p = static_cast<uint8_t*>(data);
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd, p + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  return static_cast<ssize_t>(done);
}

ssize_t preadv_full(int fd, iovec* iov, int k, uint64_t offset) {
  size_t done = 0;
  while (k > 0) {
    const ssize_t got = ::preadv(fd, iov, k, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return -1;
    if (got == 0) break;
    done += static_cast<size_t>(got);
    auto left = static_cast<size_t>(got);
    for (; k > 0 && left >= iov[0].iov_len; ++iov, --k) left -= iov[0].iov_len;
    if (k > 0) {
      iov[0].iov_base = static_cast<uint8_t*>(iov[0].iov_base) + left;
      iov[0].iov_len -= left;
    }
  }
  return static_cast<ssize_t>(done);
}

void throw_file_error(std::string_view what, std::string_view path, std::string_view op) {
  const char* why = std::strerror(errno);
  if (what.empty()) throw_error("{}: cannot {}: {}", path, op, why);
  throw_error("{}: {}: cannot {}: {}", what, path, op, why);
}

std::vector<uint8_t> read_file(const std::string& path, std::string_view what) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) throw_file_error(what, path, "open");
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) throw_file_error(what, path, "stat");
  if (!S_ISREG(st.st_mode)) {
    if (what.empty()) throw_error("{}: not a regular file", path);
    throw_error("{}: {}: not a regular file", what, path);
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  const ssize_t got = read_full(fd.get(), bytes.data(), bytes.size());
  if (got < 0) throw_file_error(what, path, "read");
  bytes.resize(static_cast<size_t>(got));
  return bytes;
}

namespace {

// fsync of the directory holding `path`, so that a rename or link in it is durable.
void sync_parent_directory(const std::string& path, std::string_view what) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  UniqueFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dfd) throw_file_error(what, dir, "open the directory to fsync it");
  if (::fsync(dfd.get()) != 0) throw_file_error(what, dir, "fsync the directory");
}

// Creates a new temporary file beside `path`, exclusively (never a file someone else uses).
UniqueFd create_temporary(const std::string& path, const AtomicWriteOptions& o,
                          std::string& tmp) {
  static std::atomic<uint64_t> counter{0};
  for (int attempt = 0;; ++attempt) {
    tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    UniqueFd fd(::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, o.mode));
    if (fd) return fd;
    // A stale name left by a killed process with the same pid: take the next one.
    if (errno != EEXIST || attempt >= 16) throw_file_error(o.what, tmp, "create");
  }
}

}  // namespace

void atomic_write(const std::string& path, const std::function<void(int fd)>& fill,
                  const AtomicWriteOptions& o) {
  std::string tmp;
  UniqueFd fd = create_temporary(path, o, tmp);
  try {
    fill(fd.get());
    if (o.durable && ::fsync(fd.get()) != 0) throw_file_error(o.what, tmp, "fsync");
    if (fd.close() != 0) throw_file_error(o.what, tmp, "close");
    if (o.replace) {
      if (::rename(tmp.c_str(), path.c_str()) != 0)
        throw_file_error(o.what, path, "rename the temporary file over");
    } else {
      // link() refuses an existing target, so a file that appeared meanwhile is never replaced.
      if (::link(tmp.c_str(), path.c_str()) != 0) throw_file_error(o.what, path, "create");
      ::unlink(tmp.c_str());
    }
  } catch (...) {
    fd.reset();
    ::unlink(tmp.c_str());
    throw;
  }
  if (o.durable) sync_parent_directory(path, o.what);
}

void atomic_write(const std::string& path, std::span<const uint8_t> bytes,
                  const AtomicWriteOptions& o) {
  atomic_write(
      path,
      [&](int fd) {
        if (!write_all(fd, bytes.data(), bytes.size())) throw_file_error(o.what, path, "write");
      },
      o);
}

}  // namespace channel
