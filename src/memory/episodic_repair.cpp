#include "memory/episodic_repair.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <unordered_set>

#include "memory/episodic_view.h"
#include "util/error.h"
#include "util/file.h"

namespace channel {
namespace {

// The file descriptor and its mapping, released on every path.
struct MappedFile {
  int fd = -1;
  void* map = MAP_FAILED;
  size_t size = 0;
  ~MappedFile() {
    if (map != MAP_FAILED) ::munmap(map, size);
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

RepairReport repair_store(const std::string& path, bool dry_run) {
  auto fail = [&](const char* op) {
    throw_error("episodic: {}: repair: {} failed: {}", path, op, std::strerror(errno));
  };
  MappedFile f;
  f.fd = ::open(path.c_str(), (dry_run ? O_RDONLY : O_RDWR) | O_CLOEXEC);
  if (f.fd < 0) fail("open");
  if (!dry_run && ::flock(f.fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK)
      throw_error("episodic: {}: repair: the store is open for writing in another process", path);
    fail("flock");
  }
  struct stat st;
  if (::fstat(f.fd, &st) != 0) fail("fstat");
  if (!S_ISREG(st.st_mode)) throw_error("episodic: {}: repair: not a regular file", path);
  f.size = static_cast<size_t>(st.st_size);
  if (f.size < sizeof(FileHeader))
    throw_error("episodic: {}: repair: the file is truncated ({} bytes): no header to trust", path,
                f.size);
  f.map = ::mmap(nullptr, f.size, PROT_READ, MAP_SHARED, f.fd, 0);
  if (f.map == MAP_FAILED) fail("mmap");
  const auto* data = static_cast<const uint8_t*>(f.map);

  StoreLayout L;
  FileHeader h;
  try {
    h = parse_header(data, f.size, path, std::nullopt, &L);
  } catch (const Error& e) {
    throw_error("{} (repair cannot fix a damaged header: nothing was written)", e.what());
  }

  RepairReport r;
  std::vector<uint64_t> drop;
  std::unordered_set<uint64_t> ids;
  for (uint64_t s = 0; s < L.max_episodes; ++s) {
    SlotState state;
    std::optional<std::string> problem = entry_problem(L, h, data, s, &state);
    if (!problem && state == SlotState::live) {
      problem = record_problem(L, data, s);
      if (!problem) problem = retrieval_entry_problem(L, data, s);
      if (!problem)
        problem = lexical_entry_problem(L, read_episode_header(L, data, s), s,
                                        data + L.lex_entry_offset(s));
      const uint64_t id = read_episode_header(L, data, s).episode_id;
      if (!problem && !ids.insert(id).second)
        problem = fmt::format("index slot {}: episode id {} is stored twice", s, id);
    }
    if (!problem) {
      r.kept += state == SlotState::live;
      continue;
    }
    drop.push_back(s);
    r.dropped.push_back(*problem);
  }
  if (dry_run || drop.empty()) return r;
  const uint32_t zero = 0;
  for (uint64_t s : drop) {
    const off_t at = static_cast<off_t>(L.entry_offset(s) + offsetof(EpisodeHeader, token_count));
    if (!pwrite_all(f.fd, &zero, sizeof zero, static_cast<uint64_t>(at))) fail("write");
  }
  if (::fdatasync(f.fd) != 0) fail("fdatasync");
  return r;
}

}  // namespace channel
