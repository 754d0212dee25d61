// episodic_store_impl.h: the state behind EpisodicStore, shared by its source files
// (episodic_store.cpp: open, create, append, reads; episodic_rehydrate.cpp: rehydration;
// episodic_query.cpp: the centroid query; episodic_retrieval.cpp: the queries over the
// retrieval section). Not a public header.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include "backend/cpu/vec_kernels.h"
#include "memory/centroid_sketch.h"
#include "memory/episodic_store.h"
#include "memory/episodic_view.h"
#include "memory/lexical_index.h"
#include "util/error.h"
#include "util/file.h"

namespace channel {

struct EpisodicStore::Impl {
  std::string path;
  StoreOptions options;
  int fd = -1;
  uint8_t* map = nullptr;  // [file_size], PROT_READ
  size_t map_size = 0;
  StoreLayout L;
  FileHeader h{};  // immutable fields; total/write_head are mirrored below

  // Liveness: changed only under an exclusive lock; every read of a live slot's bytes holds
  // a shared lock, so a slot is never rewritten while someone reads it.
  mutable std::shared_mutex state_mu;
  std::vector<SlotState> states;  // [max_episodes]
  std::unordered_map<uint64_t, uint32_t> slot_of_id;
  uint64_t total = 0;
  uint64_t write_head = 0;

  std::mutex append_mu;  // one append at a time
  std::mutex meta_mu;    // read-modify-write of the mutable entry fields

  // The int8 sketch of the centroids, built by the first query (under a shared state_mu
  // lock and sketch_mu) and then kept current by append, which sets a slot's row under the
  // exclusive lock when it publishes the slot. Rows of slots that are not live are stale.
  mutable std::unique_ptr<CentroidSketch> sketch;
  mutable std::atomic<bool> sketch_ready{false};
  // Queries so far: the first one only scans, so a process that asks once (the CLI) never
  // pays for a sketch it would not use; the second builds it.
  mutable std::atomic<uint64_t> queries_seen{0};
  mutable std::mutex sketch_mu;

  // The distinct tokens of every live episode scored by a lexical query so far, kept current
  // by id under lex_mu: read from the lexical section (version 3), or from each record's
  // token ids (older versions), always with pread, so no page is mapped (episodic_lexical.cpp).
  mutable LexicalIndex lex;
  mutable std::mutex lex_mu;
  // LexicalIndex::score of `cue` over `slots` (live, ascending, holding episodes `ids`; the
  // caller holds state_mu shared), indexing the episodes it has not seen first.
  std::vector<float> lexical_scores(std::span<const int32_t> cue, std::span<const uint32_t> slots,
                                    std::span<const uint64_t> ids) const;
  struct LexMissing {  // a live slot the lexical index does not hold yet
    uint32_t slot;
    EpisodeHeader h;
  };
  // Both with lex_mu held: one slot from its record's token ids; slots (ascending) from the
  // lexical section, in contiguous reads of up to 1 MiB, a damaged entry from its record.
  void index_from_record(uint32_t slot, const EpisodeHeader& h) const;
  void index_from_section(std::span<const LexMissing> missing) const;

  // Retrieval section (version 2): per slot 0 = not checked since open or the last write,
  // 1 = its entry verified, 2 = damaged (skipped by every retrieval query, reported once).
  // Read and written under ext_mu; append sets its slot's state under the exclusive lock.
  mutable std::mutex ext_mu;
  mutable std::vector<uint8_t> ext_state;  // [max_episodes]
  const uint8_t* ext_entry(uint32_t slot) const { return map + L.ext_entry_offset(slot); }

  // The FP16 scan of every live centroid (the caller holds state_mu shared). With `build`,
  // each row is also quantized into it (the caller holds sketch_mu).
  std::vector<RecallHit> full_scan(std::span<const float> q, float q_norm, size_t k,
                                   ThreadPool* pool, CentroidSketch* build) const;

  ~Impl() {
    if (map) munmap(map, map_size);
    if (fd >= 0) close(fd);
  }

  [[noreturn]] void fail_errno(const char* op) const {
    throw_error("episodic: {}: {} failed: {}", path, op, std::strerror(errno));
  }
  void pwrite_all(const void* buf, size_t n, uint64_t off) const {
    if (!channel::pwrite_all(fd, buf, n, off)) fail_errno("write");
  }
  // preadv until every byte of iov[0, k) is read (a short read goes on where it stopped).
  void preadv_all(iovec* iov, int k, uint64_t off) const {
    size_t want = 0;
    for (int i = 0; i < k; ++i) want += iov[i].iov_len;
    const ssize_t got = preadv_full(fd, iov, k, off);
    if (got < 0) fail_errno("read");
    if (static_cast<size_t>(got) < want)
      throw_error("episodic: {}: unexpected end of file at offset {}", path, off + got);
  }
  void durable_sync() const {
    if (options.durable && ::fdatasync(fd) != 0) fail_errno("fdatasync");
  }
  // The commit point: total_episodes and write_head, 16 bytes at offset 32 in one pwrite
  // (inside one page and one sector, so a killed process leaves the old or the new pair).
  void publish(uint64_t new_total, uint64_t new_head) const {
    uint64_t pair[2] = {new_total, new_head};
    pwrite_all(pair, sizeof pair, offsetof(FileHeader, total_episodes));
    durable_sync();
  }
  // Takes [off, off + bytes) out of this process's mapping (MADV_DONTNEED on a read-only
  // shared mapping: the file and the page cache are untouched, a later read faults the page
  // back in). Every read through the mapping ends with it, so that what a long stream has read
  // from its store does not stay resident in the process: file-backed RSS stays bounded. A
  // fault can map more than the page it touched: the cached pages of its fault-around window
  // (64 KiB by default), or a whole large folio of the page cache on newer kernels (at most
  // 2 MiB, aligned in the file). So the range is widened to kUnmapAlign in the address space
  // and in the file alike; pages of a neighbour that another thread is reading are only
  // faulted in again.
  static constexpr uint64_t kUnmapAlign = 2 << 20;
  void unmap_pages(uint64_t off, uint64_t bytes) const {
    if (bytes == 0 || off >= map_size) return;
    const auto base = reinterpret_cast<uintptr_t>(map);
    const uint64_t a = kUnmapAlign - 1;
    const uintptr_t addr_lo = (base + off) & ~a, addr_hi = (base + off + bytes + a) & ~a;
    const uint64_t lo = std::min<uint64_t>(off & ~a, addr_lo > base ? addr_lo - base : 0);
    const uint64_t hi = std::max<uint64_t>((off + bytes + a) & ~a, addr_hi - base);
    const uintptr_t begin = base + lo, end = base + std::min<uint64_t>(hi, map_size);
    if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
  }
  // The header page and the whole index table (after a scan of many entries).
  void unmap_index() const { unmap_pages(0, L.slab_offset); }
  // An index entry and a slab block (after a record was read through the mapping).
  void unmap_record(uint32_t slot) const {
    unmap_pages(L.entry_offset(slot), L.entry_bytes);
    unmap_pages(L.block_offset(slot), L.block_stride);
  }
  // The retrieval entries, or the index entries, of slots [first, last] (ascending), after a
  // scan read them: a scan unmaps as it goes (every kScanChunk slots), so that while it runs
  // it never holds more than a few chunks, however many episodes it scans.
  static constexpr size_t kScanChunk = 64;
  void unmap_ext_run(uint32_t first, uint32_t last) const {
    unmap_pages(L.ext_entry_offset(first), (last - first + 1ull) * L.ext_entry_bytes);
  }
  void unmap_entry_run(uint32_t first, uint32_t last) const {
    unmap_pages(L.entry_offset(first), (last - first + 1ull) * L.entry_bytes);
  }
  // Runs unmap at scope exit, also when a check throws.
  template <typename F>
  struct UnmapAfter {
    F f;
    ~UnmapAfter() { f(); }
  };
  template <typename F>
  UnmapAfter(F) -> UnmapAfter<F>;  // clang before 17 deduces no aggregate's arguments
  const uint8_t* entry(uint32_t slot) const { return map + L.entry_offset(slot); }
  const uint8_t* block(uint32_t slot) const { return map + L.block_offset(slot); }
  // One slot's index header read with pread: no page of the mapping is touched, so nothing
  // stays resident (for single lookups; a scan of many entries uses header_at and then
  // unmap_index).
  EpisodeHeader header_of(uint32_t slot) const {
    EpisodeHeader e;
    iovec iov{&e, sizeof e};
    preadv_all(&iov, 1, L.entry_offset(slot));
    return e;
  }
  // Through the mapping: the caller unmaps what it read (unmap_index).
  EpisodeHeader header_at(uint32_t slot) const { return read_episode_header(L, map, slot); }

  uint32_t require_slot(uint64_t id) const {  // caller holds state_mu
    auto it = slot_of_id.find(id);
    if (it == slot_of_id.end()) {
      throw_error("episodic: {}: episode {} is not in the store", path, id);
    }
    return it->second;
  }
  void check_record(uint32_t slot, const uint32_t* kv_crc = nullptr) const {
    if (auto p = record_problem(L, map, slot, kv_crc)) fail_record(slot, *p);
  }
  // Throws for a record that failed its check (problem says how).
  [[noreturn]] void fail_record(uint32_t slot, const std::string& problem) const {
    // A reader shares the file with one writer, which rewrites a slot only after zeroing its
    // token_count and then gives it a new id: a record that fails while its entry no longer
    // holds the id this reader saw was replaced meanwhile, not damaged.
    if (options.read_only && !holds_expected(slot))
      throw EpisodeReplaced(fmt::format(
          "episodic: {}: the episode in slot {} was replaced by the process writing the store",
          path, slot));
    throw_error("episodic: {}: {}", path, problem);
  }
  // After a reader copied a record out of the mapping: the writer empties a slot before it
  // rewrites it, so an entry that still holds the id means the copy is whole.
  void check_unchanged(uint32_t slot) const {
    if (options.read_only && !holds_expected(slot))
      throw EpisodeReplaced(fmt::format(
          "episodic: {}: the episode in slot {} was replaced by the process writing the store",
          path, slot));
  }
  // The slot's entry still holds the episode this process indexed (for readers; the caller
  // holds state_mu).
  bool holds_expected(uint32_t slot) const {
    std::atomic_thread_fence(std::memory_order_acquire);
    const EpisodeHeader now = header_of(slot);
    for (const auto& [id, at] : slot_of_id)
      if (at == slot) return now.token_count != 0 && now.episode_id == id;
    return false;
  }
  void require_writable() const {
    if (options.read_only) throw_error("episodic: {}: opened read-only", path);
  }
  // Dequantizes n rows of one plane to f32.
  void load_plane(const uint8_t* src, size_t n, float* dst) const {
    if (L.slab_type == SlabType::f16) {
      // Planes are 2-byte aligned: blocks are 64-aligned and every offset in them is even.
      cpu::dequantize_row_f16(reinterpret_cast<const uint16_t*>(src), dst, n * L.kv_dim);
    } else {
      cpu::dequantize_row_q8_0(src, dst, n * L.kv_dim);
    }
  }
};

}  // namespace channel
