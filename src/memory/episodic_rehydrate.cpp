// EpisodicStore::rehydrate: an episode's K/V rows read, converted to f16/f32 and its keys
// re-rotated by Δ positions in one pass, from the mapping (warm) or with preadv straight
// into the target (cold).
#include <sys/uio.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "memory/episodic_store.h"
#include "memory/episodic_store_impl.h"
#include "memory/episodic_view.h"
#include "memory/page_residency.h"
#include "memory/rehydrate_kernels.h"
#include "ops/fp16.h"
#include "util/error.h"
#include "util/hash.h"

namespace channel {

namespace {

// From this many bytes of f32 output on (twice a core's L2), rehydrate() writes with
// non-temporal stores: a normal store first reads its line, and lines past L2 go back out
// anyway. Kernel alone, quiet 16-core Xeon pinned to 2 cores: 14 % faster at 6 MB, 18 % at
// 24 MB, 2.1x at 100 MB; the shared 2-core VM: 5 % slower at 6 MB, even at 24 MB, 1.5x faster
// at 100 MB (bench/memory_rehydrate_bench.cpp, BM_RehydrateKernel).
constexpr uint64_t kStreamBytes = 4ull << 20;

}  // namespace

void EpisodicStore::rehydrate(uint64_t id, std::span<const RotaryDims> rope, double delta,
                              float* k_out, float* v_out, bool verify) const {
  const StoreLayout& L = impl_->L;
  uint32_t n = 0;
  if (auto h = find(id)) n = h->token_count;  // unknown: the call below says so
  const uint32_t head_dim = rope.empty() ? 1 : std::max(1u, rope[0].head_dim);
  DenseKvRows dense(k_out, v_out, L.num_layers, n, L.kv_dim, head_dim);
  RehydrateOptions o;
  o.verify = verify;
  rehydrate(id, rope, delta, dense.target(), o);
}

namespace {

// Throws unless `rope` (one description, or one per layer) and the options' rotation tables
// describe rows of this store.
void check_rope(const std::string& path, const StoreLayout& L, std::span<const RotaryDims> rope,
                const RehydrateOptions& options) {
  if (rope.size() != 1 && rope.size() != L.num_layers) {
    throw_error("episodic: {}: rehydrate: {} rotary descriptions for {} layers", path, rope.size(),
                L.num_layers);
  }
  for (const RotaryDims& r : rope) {
    if (r.row_dim() != L.kv_dim || r.head_dim != rope[0].head_dim || r.n_rot > r.head_dim ||
        r.n_rot % 2 != 0 || r.inv_freq.size() != r.n_rot / 2) {
      throw_error(
          "episodic: {}: rehydrate: rotary rows of {} x {} ({} rotated dims, {} frequencies) do "
          "not match kv_dim {} (or the first layer's head split)",
          path, r.n_heads, r.head_dim, r.n_rot, r.inv_freq.size(), L.kv_dim);
    }
  }
  if (!options.tables.empty()) {
    if (options.tables.size() != rope.size())
      throw_error("episodic: {}: rehydrate: {} rotation tables for {} rotary descriptions", path,
                  options.tables.size(), rope.size());
    for (size_t i = 0; i < rope.size(); ++i)
      if (!options.tables[i].matches(rope[i]))
        throw_error("episodic: {}: rehydrate: rotation table {} was built for other frequencies",
                    path, i);
  }
}

// The rotation by `delta` of each layer's keys, [num_layers], in thread-local storage that
// stays valid until the next call on this thread. Angles once per distinct rope (layers
// sharing one share them).
const HeadRotation* key_rotations(const StoreLayout& L, std::span<const RotaryDims> rope,
                                  double delta, const RehydrateOptions& options) {
  thread_local std::vector<double> cos_d, sin_d;  // [n_rot / 2]
  thread_local std::vector<float> cs;             // [n_sets][2][n_rot]
  thread_local std::vector<size_t> cs_at;         // [num_layers] offset of the layer's set
  thread_local std::vector<HeadRotation> rot_of;  // [num_layers]
  size_t used = 0;  // floats of cs in use (grown, never cleared: no zero-filling per call)
  cs_at.resize(L.num_layers);
  size_t prev = 0;
  for (uint32_t l = 0; l < L.num_layers; ++l) {
    const size_t ri = rope.size() == 1 ? 0 : l;
    const RotaryDims& r = rope[ri];
    if (l > 0 && (ri == prev || (rope[prev].inv_freq == r.inv_freq && rope[prev].style == r.style &&
                                 rope[prev].n_rot == r.n_rot))) {
      cs_at[l] = cs_at[l - 1];
      continue;
    }
    prev = ri;
    const size_t half = r.n_rot / 2;
    cos_d.resize(half);
    sin_d.resize(half);
    if (!options.tables.empty()) {
      options.tables[ri].cos_sin(delta, cos_d.data(), sin_d.data());
    } else {
      for (size_t i = 0; i < half; ++i) {
        cos_d[i] = std::cos(delta * r.inv_freq[i]);
        sin_d[i] = std::sin(delta * r.inv_freq[i]);
      }
    }
    cs_at[l] = used;
    used += 2 * r.n_rot;
    if (cs.size() < used) cs.resize(used);
    float* c = cs.data() + cs_at[l];
    expand_rotation(r.style == RopeStyle::neox, r.n_rot, cos_d.data(), sin_d.data(), c,
                    c + r.n_rot);
  }
  rot_of.resize(L.num_layers);
  for (uint32_t l = 0; l < L.num_layers; ++l) {
    const RotaryDims& r = rope[rope.size() == 1 ? 0 : l];
    rot_of[l] = {r.style == RopeStyle::neox, r.n_rot, cs.data() + cs_at[l],
                 cs.data() + cs_at[l] + r.n_rot};
  }
  return rot_of.data();
}

// Runs planes [0, n_planes) (plane i: layer i / 2, K or V) serially, or over the pool for an
// episode of at least kParallelBytes of K/V. A template, so that the serial call (every small
// recall) makes no std::function.
template <typename F>
void for_planes(const RehydrateOptions& options, uint64_t bytes, uint32_t num_layers, F&& planes) {
  const auto n_planes = static_cast<int64_t>(2 * num_layers);
  if (options.pool && options.pool->size() > 1 && bytes >= RehydrateOptions::kParallelBytes) {
    options.pool->parallel_for(n_planes, planes);
  } else {
    planes(0, n_planes, 0);
  }
}

// A thread's planes are handed to KvRowsF16::ready in runs of at least this many bytes (and at
// the end of its share): a device copies each run while the next is read, in few calls.
constexpr uint64_t kReadyBytes = 512 << 10;

}  // namespace

void EpisodicStore::rehydrate(uint64_t id, std::span<const RotaryDims> rope, double delta,
                              const KvRowTarget& out, const RehydrateOptions& options) const {
  const Impl& m = *impl_;
  const StoreLayout& L = m.L;
  check_rope(m.path, L, rope, options);
  if (out.k.size() != L.num_layers || out.v.size() != L.num_layers)
    throw_error("episodic: {}: rehydrate: a target of {} K and {} V layers for {} layers", m.path,
                out.k.size(), out.v.size(), L.num_layers);
  for (uint32_t l = 0; l < L.num_layers; ++l)
    if (!out.k[l] || !out.v[l])
      throw_error("episodic: {}: rehydrate: the target of layer {} is null", m.path, l);

  std::shared_lock lock(m.state_mu);
  const uint32_t slot = m.require_slot(id);
  // The entry and block are read through the mapping (the checks, the warm path): out of it
  // again at the end, also when a check throws.
  Impl::UnmapAfter unmap{[&] { m.unmap_record(slot); }};
  if (options.verify) m.check_record(slot);
  const size_t n = m.header_of(slot).token_count;
  if (n > out.max_tokens)
    throw_error("episodic: {}: rehydrate: episode {} has {} tokens, the target holds {}", m.path,
                id, n, out.max_tokens);
  const uint8_t* b = m.block(slot);
  const uint64_t bytes = L.kv_bytes(n);
  if (const uint64_t at = L.block_offset(slot) + L.block_kv; !pages_mapped(m.map + at, bytes)) {
    // Readahead of exactly the K/V range: from a cold page cache the first fault would read
    // around it (128 KiB centred on the fault: twice what a small episode needs) and a large
    // episode would come in a few pages per fault. posix_fadvise costs less than madvise (no
    // address-space lock) and little on a warm cache. Advisory: errors are ignored.
    ::posix_fadvise(m.fd, static_cast<off_t>(at), static_cast<off_t>(bytes), POSIX_FADV_WILLNEED);
  }
  const HeadRotation* rots = key_rotations(L, rope, delta, options);

  // Plane i: layer i / 2, K (even) or V (odd), straight from the mapping into the target.
  const uint64_t out_bytes = bytes / L.row_bytes * L.kv_dim * sizeof(float);  // 2 L n rows
  const bool stream = out_bytes >= kStreamBytes;
  for_planes(options, bytes, L.num_layers, [&, rots](int64_t begin, int64_t end, int) {
    thread_local std::vector<float> row;  // [kv_dim] a Q8_0 row dequantized
    for (int64_t i = begin; i < end; ++i) {
      const auto l = static_cast<uint32_t>(i / 2);
      const int kv = static_cast<int>(i % 2);
      const RotaryDims& r = rope[rope.size() == 1 ? 0 : l];
      const RowLayout lay{r.n_heads, r.head_dim, out.token_stride, out.head_stride, stream};
      const HeadRotation* rot = kv == 0 ? &rots[l] : nullptr;
      float* dst = (kv == 0 ? out.k[l] : out.v[l]) + out.offset;
      const uint8_t* src = b + L.kv_plane(n, l, kv);
      if (L.slab_type == SlabType::f16) {
        // Planes are 2-byte aligned: blocks are 64-aligned and every offset in them is even.
        f16_rows_to_f32(rot, reinterpret_cast<const uint16_t*>(src), n, lay, dst);
      } else {
        row.resize(L.kv_dim);
        for (size_t t = 0; t < n; ++t) {
          cpu::dequantize_row_q8_0(src + t * L.row_bytes, row.data(), L.kv_dim);
          f32_rows_to_f32(rot, row.data(), 1, lay, dst + t * out.token_stride);
        }
      }
    }
  });
  m.check_unchanged(slot);  // a reader: the writer did not replace it while it was read
}

void EpisodicStore::rehydrate(uint64_t id, std::span<const RotaryDims> rope, double delta,
                              const KvRowsF16& out, const RehydrateOptions& options) const {
  const Impl& m = *impl_;
  const StoreLayout& L = m.L;
  check_rope(m.path, L, rope, options);
  if (out.k.size() != L.num_layers || out.v.size() != L.num_layers || out.row_dim != L.kv_dim)
    throw_error(
        "episodic: {}: rehydrate: a target of {} K and {} V layers of rows of {} for {} layers "
        "of rows of {}",
        m.path, out.k.size(), out.v.size(), out.row_dim, L.num_layers, L.kv_dim);
  for (uint32_t l = 0; l < L.num_layers; ++l)
    if (!out.k[l] || !out.v[l])
      throw_error("episodic: {}: rehydrate: the target of layer {} is null", m.path, l);

  std::shared_lock lock(m.state_mu);
  const uint32_t slot = m.require_slot(id);
  // The entry and block are read through the mapping (the checks, the warm path): out of it
  // again at the end, also when a check throws.
  Impl::UnmapAfter unmap{[&] { m.unmap_record(slot); }};
  const EpisodeHeader eh = m.header_of(slot);
  const size_t n = eh.token_count;
  if (n > out.max_tokens)
    throw_error("episodic: {}: rehydrate: episode {} has {} tokens, the target holds {}", m.path,
                id, n, out.max_tokens);
  const uint64_t boff = L.block_offset(slot), kv_at = boff + L.block_kv;
  const uint64_t bytes = L.kv_bytes(n);
  const uint64_t plane_bytes = n * L.row_bytes;
  const HeadRotation* rots = key_rotations(L, rope, delta, options);
  const uint32_t heads = rope[0].n_heads, head_dim = rope[0].head_dim;
  auto target = [&](int64_t i) { return (i % 2 == 0 ? out.k : out.v)[static_cast<size_t>(i / 2)]; };

  // Cached pages are read through the mapping; mapped ones (no system call to learn it) surely
  // are. Otherwise, or when asked to, the cold path (a Q8_0 record is always read through the
  // mapping: it is dequantized row by row).
  const bool cached = L.slab_type != SlabType::f16 ||
                      (!options.always_pread && (pages_mapped(m.map + kv_at, bytes) ||
                                                 pages_cached(m.fd, kv_at, m.map + kv_at, bytes)));
  if (!cached) {
    // Cold: read the planes straight into the target with preadv, as many per call as fit
    // kColdBatch bytes (a small episode in one call: the reads a plain pread of the record
    // would make), then rotate the batch's keys in place while they are in cache. One thread:
    // the disk is the bottleneck, and two streams of reads were slower than one. Verified,
    // the first call also reads the block before the K/V (header, summary, tokens), and the
    // checksum is chained over the planes as they arrive, before their keys are rotated.
    constexpr uint64_t kColdBatch = 256 << 10;
    constexpr int kMaxIov = 64;
    thread_local std::vector<uint8_t> prefix;  // [block_kv] the block up to its K/V
    uint32_t crc = 0;
    const int64_t end = 2 * static_cast<int64_t>(L.num_layers);
    iovec iov[kMaxIov];
    for (int64_t i = 0; i < end;) {
      const int64_t from = i;
      const bool with_prefix = options.verify && i == 0;
      int k = 0;
      if (with_prefix) {
        prefix.resize(L.block_kv);
        iov[k++] = {prefix.data(), prefix.size()};
      }
      while (i < end && k < kMaxIov &&
             (i == from || static_cast<uint64_t>(i - from + 1) * plane_bytes <= kColdBatch)) {
        iov[k++] = {target(i), plane_bytes};
        ++i;
      }
      m.preadv_all(iov, k, with_prefix ? boff : kv_at + static_cast<uint64_t>(from) * plane_bytes);
      if (options.verify) {
        if (with_prefix) {
          if (auto p = block_header_problem(eh, slot, prefix.data(), boff))
            throw_error("episodic: {}: {}", m.path, *p);
          crc = record_checksum_head(L, m.entry(slot), prefix.data());
        }
        for (int64_t j = from; j < i; ++j) crc = crc32c(crc, target(j), plane_bytes);
      }
      for (int64_t j = from; j < i; ++j)
        if (j % 2 == 0) f16_rows_to_f16(&rots[j / 2], target(j), n, heads, head_dim, target(j));
      if (out.ready) out.ready(static_cast<size_t>(from), static_cast<size_t>(i - from));
    }
    if (options.verify) {
      SlabBlockHeader bh;
      std::memcpy(&bh, prefix.data(), sizeof bh);
      if (crc != bh.crc)
        throw_error("episodic: {}: {}", m.path, checksum_problem(eh, slot, boff, bh.crc, crc));
    }
    return;
  }
  // Warm. Verified, each plane's checksum is taken right after it lands (on the pool's
  // threads when there is one: one thread alone checked a 12.6 MB episode slower than a device
  // copies it) and the parts joined in order at the end, so a mismatch is found after the rows
  // were written, as on the cold path. Δ = 0 (a device turns the keys itself): the keys as
  // stored.
  const bool as_stored = delta == 0.0;
  std::vector<uint32_t> plane_crc(options.verify ? 2 * L.num_layers : 0);
  auto verify_and_finish = [&] {
    if (options.verify) {
      const uint32_t kv_crc = crc32c_join(plane_crc, plane_bytes);
      m.check_record(slot, &kv_crc);
    }
    m.check_unchanged(slot);  // a reader: the writer did not replace it while it was read
  };
  if (L.slab_type == SlabType::f16 && as_stored) {
    // A plain copy: each plane read with pread straight into the target, no page of the
    // mapping touched (a mapped read faults every page in again: the record is unmapped after
    // each read), the planes spread over the pool.
    for_planes(options, bytes, L.num_layers, [&](int64_t begin, int64_t end, int) {
      int64_t run = begin;  // the first plane not yet handed over
      for (int64_t i = begin; i < end; ++i) {
        iovec iov{target(i), plane_bytes};
        m.preadv_all(&iov, 1, kv_at + static_cast<uint64_t>(i) * plane_bytes);
        if (options.verify) plane_crc[static_cast<size_t>(i)] = crc32c(0, target(i), plane_bytes);
        if (out.ready &&
            (i + 1 == end || static_cast<uint64_t>(i + 1 - run) * plane_bytes >= kReadyBytes)) {
          out.ready(static_cast<size_t>(run), static_cast<size_t>(i + 1 - run));
          run = i + 1;
        }
      }
    });
    verify_and_finish();
    return;
  }
  // Keys turned, or Q8_0 rows dequantized: one pass per row from the mapping (for turned f16
  // keys faster than a read and a second pass: 0.66-0.88 against 1.2-1.5 ms for a 12.6 MB
  // episode on one Zen 4 thread, memory_rehydrate_bench BM_Recall).
  const uint8_t* b = m.block(slot);
  for_planes(options, bytes, L.num_layers, [&](int64_t begin, int64_t end, int) {
    thread_local std::vector<float> row;  // [2][kv_dim] a Q8_0 row dequantized, then rotated
    for (int64_t i = begin; i < end; ++i) {
      const auto l = static_cast<uint32_t>(i / 2);
      const HeadRotation* rot = i % 2 == 0 && !as_stored ? &rots[l] : nullptr;
      const uint8_t* src = b + L.kv_plane(n, l, static_cast<int>(i % 2));
      uint16_t* dst = target(i);
      if (L.slab_type == SlabType::f16) {
        if (rot) {
          f16_rows_to_f16(rot, reinterpret_cast<const uint16_t*>(src), n, heads, head_dim, dst);
        } else {
          std::memcpy(dst, src, plane_bytes);
        }
        if (options.verify) plane_crc[static_cast<size_t>(i)] = crc32c(0, src, plane_bytes);
        if (out.ready) out.ready(static_cast<size_t>(i), 1);
        continue;
      }
      row.resize(2 * L.kv_dim);
      const RowLayout dense{heads, head_dim, L.kv_dim, head_dim};
      for (size_t t = 0; t < n; ++t) {
        cpu::dequantize_row_q8_0(src + t * L.row_bytes, row.data(), L.kv_dim);
        f32_rows_to_f32(rot, row.data(), 1, dense, row.data() + L.kv_dim);
        for (size_t d = 0; d < L.kv_dim; ++d)
          dst[t * L.kv_dim + d] = fp32_to_fp16(row[L.kv_dim + d]);
      }
      if (options.verify) plane_crc[static_cast<size_t>(i)] = crc32c(0, src, plane_bytes);
      if (out.ready) out.ready(static_cast<size_t>(i), 1);
    }
  });
  verify_and_finish();
}

bool EpisodicStore::with_stored_kv(uint64_t id,
                                   const std::function<void(const StoredKvF16&)>& fn) const {
  const Impl& m = *impl_;
  const StoreLayout& L = m.L;
  if (L.slab_type != SlabType::f16) return false;
  std::shared_lock lock(m.state_mu);
  const uint32_t slot = m.require_slot(id);
  // Everything the host reads here it reads with pread, so no page of the mapping is touched
  // and none needs unmapping after: on the H200's virtual machine, unmapping the few pages a
  // check read through the mapping cost 0.1-0.3 ms a recall (the other threads' TLBs).
  const EpisodeHeader eh = m.header_of(slot);
  const size_t n = eh.token_count;
  const uint64_t boff = L.block_offset(slot);
  StoredKvF16 src;
  // [num_layers][K|V][n][kv_dim] f16 from the block's K/V on: planes are 2-byte aligned
  // (blocks are 64-aligned and every offset in them is even).
  src.planes = reinterpret_cast<const uint16_t*>(m.map + boff + L.block_kv);
  src.n_tokens = n;
  src.row_dim = L.kv_dim;
  src.n_planes = 2ull * L.num_layers;
  src.region = m.map;
  src.region_bytes = m.map_size;
  if (n > L.max_tokens || L.row_bytes != 2ull * L.kv_dim ||
      boff + L.block_kv + L.kv_bytes(n) > m.map_size)
    throw_error("episodic: {}: episode {} claims {} tokens (at most {}): its entry is damaged",
                m.path, id, n, L.max_tokens);
  const uint64_t plane_bytes = n * L.row_bytes;
  // What the check needs besides the planes: the entry and the block's head read apart, and
  // the head's checksum already shifted past the K/V (as record_problem).
  struct Head {
    bool read = false;
    std::optional<std::string> problem;
    EpisodeHeader entry;
    uint32_t stored_crc = 0, head_shifted = 0;
  } head_check;
  src.prepare = [&] {
    if (head_check.read) return;
    std::vector<uint8_t> entry(L.entry_bytes), head(L.block_kv);
    iovec e{entry.data(), entry.size()}, h{head.data(), head.size()};
    m.preadv_all(&e, 1, L.entry_offset(slot));
    m.preadv_all(&h, 1, boff);
    EpisodeHeader now;
    std::memcpy(&now, entry.data(), sizeof now);
    head_check.problem = block_header_problem(now, slot, head.data(), boff);
    if (!head_check.problem) {
      SlabBlockHeader bh;
      std::memcpy(&bh, head.data(), sizeof bh);
      head_check.stored_crc = bh.crc;
      head_check.head_shifted = crc32c_mul(record_checksum_head(L, entry.data(), head.data()),
                                           crc32c_shift(L.kv_bytes(now.token_count)));
    }
    head_check.entry = now;
    head_check.read = true;
  };
  src.verify = [&](std::span<const uint32_t> plane_crc) {
    if (plane_crc.size() != src.n_planes)
      throw_error("episodic: {}: {} plane checksums for {} planes", m.path, plane_crc.size(),
                  src.n_planes);
    src.prepare();
    auto problem = head_check.problem;
    if (!problem) {
      const uint32_t crc = head_check.head_shifted ^ crc32c_join(plane_crc, plane_bytes);
      if (crc != head_check.stored_crc)
        problem = checksum_problem(head_check.entry, slot, boff, head_check.stored_crc, crc);
    }
    if (problem) m.fail_record(slot, *problem);
  };
  fn(src);
  m.check_unchanged(slot);  // a reader: the writer did not replace it while it was read
  return true;
}

}  // namespace channel
