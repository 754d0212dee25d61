// EpisodicStore: open/create, the crash-safe append, reads and the per-episode metadata
// (access, pin, remove). Rehydration is in episodic_rehydrate.cpp, the queries in
// episodic_query.cpp and episodic_retrieval.cpp.
#include "memory/episodic_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "backend/cpu/thread_pool.h"
#include "backend/cpu/vec_kernels.h"
#include "memory/centroid_sketch.h"
#include "memory/episodic_store_impl.h"
#include "memory/episodic_view.h"
#include "memory/memory_kernels.h"
#include "memory/page_residency.h"
#include "memory/rehydrate_kernels.h"
#include "ops/fp16.h"
#include "util/error.h"
#include "util/hash.h"

namespace channel {

uint64_t now_ms() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

std::string_view utf8_prefix(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  size_t n = max_bytes;
  // Back up over continuation bytes (10xxxxxx) so the cut lands before a lead byte.
  while (n > 0 && (static_cast<uint8_t>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}


EpisodicStore::EpisodicStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EpisodicStore::EpisodicStore(EpisodicStore&&) noexcept = default;
EpisodicStore& EpisodicStore::operator=(EpisodicStore&&) noexcept = default;
EpisodicStore::~EpisodicStore() = default;

namespace {

// {total_episodes, write_head} as the file holds them now.
std::pair<uint64_t, uint64_t> published_pair(const uint8_t* map) {
  std::atomic_thread_fence(std::memory_order_acquire);
  uint64_t pair[2];
  std::memcpy(pair, map + offsetof(FileHeader, total_episodes), sizeof pair);
  return {pair[0], pair[1]};
}

}  // namespace

// A reader takes no lock, so a writer may append while it scans the index. Every append
// publishes a new {total_episodes, write_head} pair (the pair never repeats) and writes
// record bytes only at write_head, so a scan between two equal readings of the pair saw a
// consistent index; a scan that a publish overlapped is repeated (a torn entry at write_head
// can fail a check until the writer's pwrite completes, so failures are retried too).
void read_consistent_index(EpisodicStore::Impl& m, size_t size) {
  constexpr int kAttempts = 50;
  for (int attempt = 1;; ++attempt) {
    const auto before = published_pair(m.map);
    try {
      m.h = parse_header(m.map, size, m.path, m.options.model_hash, &m.L);
      m.states = parse_index(m.L, m.h, m.map, m.path);
      if (published_pair(m.map) == before) return;
    } catch (const Error&) {
      if (attempt >= kAttempts) throw;
      ::usleep(1000);  // let a writer's pwrite or publish land
    }
    if (attempt >= kAttempts)
      throw_error("episodic: {}: the store changed during each of {} reads of its index", m.path,
                  kAttempts);
  }
}

EpisodicStore EpisodicStore::open(const std::string& path, const StoreOptions& options) {
  auto m = std::make_unique<Impl>();
  m->path = path;
  m->options = options;
  m->fd = ::open(path.c_str(), (options.read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
  if (m->fd < 0) m->fail_errno("open");
  if (!options.read_only && ::flock(m->fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      throw_error("episodic: {}: the store is open for writing in another process", path);
    }
    m->fail_errno("flock");
  }
  struct stat st;
  if (::fstat(m->fd, &st) != 0) m->fail_errno("fstat");
  if (!S_ISREG(st.st_mode)) throw_error("episodic: {}: not a regular file", path);
  const size_t size = static_cast<size_t>(st.st_size);
  if (size < sizeof(FileHeader)) {
    uint8_t head[sizeof(FileHeader)] = {};
    const ssize_t got = pread_full(m->fd, head, size, 0);
    parse_header(head, got < 0 ? 0 : static_cast<size_t>(got), path, options.model_hash,
                 nullptr);  // throws: truncated
  }
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, m->fd, 0);
  if (p == MAP_FAILED) m->fail_errno("mmap");
  m->map = static_cast<uint8_t*>(p);
  m->map_size = size;
  if (options.read_only) {
    read_consistent_index(*m, size);
  } else {
    m->h = parse_header(m->map, size, path, options.model_hash, &m->L);
    m->states = parse_index(m->L, m->h, m->map, path);
  }
  m->ext_state.assign(m->L.ext_kinds ? m->L.max_episodes : 0, 0);
  m->total = m->h.total_episodes;
  m->write_head = m->h.write_head;
  for (uint32_t s = 0; s < m->L.max_episodes; ++s) {
    if (m->states[s] == SlotState::live) m->slot_of_id[m->header_at(s).episode_id] = s;
  }
  // Read through the mapping by the checks above: the index table and the section headers.
  m->unmap_index();
  if (m->L.ext_kinds) m->unmap_pages(m->L.ext_offset, 64);
  if (m->L.has_lexical()) m->unmap_pages(m->L.lex_offset, 64);
  return EpisodicStore(std::move(m));
}

EpisodicStore EpisodicStore::create(const std::string& path, const StoreGeometry& geometry,
                                    uint64_t model_hash, const StoreOptions& options) {
  const StoreLayout L = make_layout(geometry, fmt::format("episodic: {}: create", path));
  if (std::filesystem::exists(path)) {
    throw_error("episodic: {}: create: the file already exists (it is never replaced)", path);
  }
  FileHeader h{};
  std::memcpy(h.magic, kEmemMagic, 4);
  h.version = L.version;
  h.file_flags = geometry.slab_type == SlabType::f16 ? kFileFp16 : kFileQ8_0;
  h.num_layers = geometry.num_layers;
  h.hidden_size = geometry.hidden_size;
  h.kv_dim = geometry.kv_dim;
  h.max_episodes = geometry.max_episodes;
  h.model_id_hash = model_hash;
  h.max_tokens_per_episode = geometry.max_tokens;
  h.header_crc = header_crc(h);

  const std::string what = fmt::format("episodic: {}: create", path);
  atomic_write(
      path,
      [&](int fd) {
        // The file is sparse: zero index entries are empty slots, and blocks are written on
        // append.
        if (::ftruncate(fd, static_cast<off_t>(L.file_size)) != 0)
          throw_file_error(what, path, "ftruncate");
        if (!pwrite_all(fd, &h, sizeof h, 0)) throw_file_error(what, path, "write");
        if (L.ext_kinds) {
          const RetrievalSectionHeader rh = retrieval_section_header(L);
          if (!pwrite_all(fd, &rh, sizeof rh, L.ext_offset)) throw_file_error(what, path, "write");
        }
        if (L.has_lexical()) {
          const LexicalSectionHeader xh = lexical_section_header(L);
          if (!pwrite_all(fd, &xh, sizeof xh, L.lex_offset)) throw_file_error(what, path, "write");
        }
      },
      {.what = what, .replace = false, .durable = options.durable});
  StoreOptions o = options;
  o.model_hash = model_hash;
  return open(path, o);
}

const std::string& EpisodicStore::path() const {
  return impl_->path;
}
const StoreLayout& EpisodicStore::layout() const {
  return impl_->L;
}

FileHeader EpisodicStore::header() const {
  std::shared_lock lock(impl_->state_mu);
  FileHeader h = impl_->h;
  h.total_episodes = impl_->total;
  h.write_head = impl_->write_head;
  return h;
}
uint64_t EpisodicStore::total_episodes() const {
  std::shared_lock lock(impl_->state_mu);
  return impl_->total;
}
uint64_t EpisodicStore::live_count() const {
  std::shared_lock lock(impl_->state_mu);
  return impl_->slot_of_id.size();
}

std::vector<EpisodeHeader> EpisodicStore::list() const {
  std::shared_lock lock(impl_->state_mu);
  std::vector<EpisodeHeader> out;
  out.reserve(impl_->slot_of_id.size());
  Impl::UnmapAfter unmap{[&] { impl_->unmap_index(); }};
  for (const auto& [id, slot] : impl_->slot_of_id) {
    const EpisodeHeader h = impl_->header_at(slot);
    // A reader skips what the writer evicted or replaced since it opened the store.
    if (h.episode_id != id || h.token_count == 0) continue;
    out.push_back(h);
  }
  std::sort(out.begin(), out.end(), [](const EpisodeHeader& a, const EpisodeHeader& b) {
    return a.episode_id < b.episode_id;
  });
  return out;
}

std::optional<EpisodeHeader> EpisodicStore::find(uint64_t id) const {
  std::shared_lock lock(impl_->state_mu);
  auto it = impl_->slot_of_id.find(id);
  if (it == impl_->slot_of_id.end()) return std::nullopt;
  const EpisodeHeader h = impl_->header_of(it->second);
  if (h.episode_id != id || h.token_count == 0) return std::nullopt;  // replaced (readers)
  return h;
}

namespace {

// The slab block image of a record: [block_kv + kv_bytes(n)] bytes.
std::vector<uint8_t> build_block(const StoreLayout& L, uint64_t id, const EpisodeRecord& r,
                                 std::string_view summary) {
  const size_t n = r.tokens.size();
  std::vector<uint8_t> b(L.block_kv + L.kv_bytes(n), 0);
  SlabBlockHeader bh{};
  bh.magic = kSlabBlockMagic;
  bh.episode_id = id;
  bh.token_count = static_cast<uint32_t>(n);
  bh.summary_len = static_cast<uint16_t>(summary.size());
  std::memcpy(b.data(), &bh, sizeof bh);
  if (!summary.empty()) std::memcpy(b.data() + L.block_summary, summary.data(), summary.size());
  std::memcpy(b.data() + L.block_tokens, r.tokens.data(), 4 * n);
  const size_t rows = 2ull * L.num_layers * n;  // the kv span is [L][2][n][kv_dim] already
  for (size_t i = 0; i < rows; ++i) {
    uint8_t* dst = b.data() + L.block_kv + i * L.row_bytes;
    const float* src = r.kv.data() + i * L.kv_dim;
    if (L.slab_type == SlabType::f16) {
      f32_to_f16_row(src, reinterpret_cast<uint16_t*>(dst), L.kv_dim);
    } else {
      cpu::quantize_row_q8_0(src, dst, L.kv_dim);
    }
  }
  return b;
}

// The retrieval entry image of a record: [ext_entry_bytes] bytes (empty for version 1).
std::vector<uint8_t> build_retrieval_entry(const StoreLayout& L, uint64_t id,
                                           const EpisodeRecord& r) {
  if (L.ext_kinds == 0) return {};
  std::vector<uint8_t> e(L.ext_entry_bytes, 0);
  RetrievalEntryHeader eh{};
  eh.episode_id = id;
  eh.token_count = static_cast<uint32_t>(r.tokens.size());
  if (L.has_keys())
    f32_to_f16_row(r.rep_keys.data(), reinterpret_cast<uint16_t*>(e.data() + L.ext_keys),
                   L.keys_values());
  if (L.has_proj())
    f32_to_f16_row(r.proj.data(), reinterpret_cast<uint16_t*>(e.data() + L.ext_proj),
                   r.proj.size());
  std::memcpy(e.data(), &eh, sizeof eh);
  eh.crc = retrieval_entry_crc(L, e.data());
  std::memcpy(e.data(), &eh, sizeof eh);
  return e;
}

}  // namespace

uint64_t EpisodicStore::append(const EpisodeRecord& r) {
  Impl& m = *impl_;
  m.require_writable();
  const StoreLayout& L = m.L;
  const std::string what = fmt::format("episodic: {}: append", m.path);
  const size_t n = r.tokens.size();
  if (n == 0 || n > L.max_tokens) {
    throw_error("{}: {} tokens, the store takes 1..{} per episode", what, n, L.max_tokens);
  }
  if (r.centroid.size() != L.hidden_size) {
    throw_error("{}: centroid has {} values, hidden_size is {}", what, r.centroid.size(),
                L.hidden_size);
  }
  if (r.kv.size() != 2ull * L.num_layers * n * L.kv_dim) {
    throw_error("{}: kv has {} values, expected {} ([{}][2][{}][{}])", what, r.kv.size(),
                2ull * L.num_layers * n * L.kv_dim, L.num_layers, n, L.kv_dim);
  }
  if (r.flags & ~kEpisodeKnownFlags) throw_error("{}: unknown flags {:#x}", what, r.flags);
  if (L.has_keys() && r.rep_keys.size() != L.keys_values()) {
    throw_error("{}: {} representative key values, the store keeps {} ([{}][{}][{}][{}])", what,
                r.rep_keys.size(), L.keys_values(), L.num_layers, L.key_heads, L.keys_per_head,
                L.head_dim);
  }
  if (L.has_proj() && r.proj.size() != n * L.proj_dim) {
    throw_error("{}: {} projected values, the store keeps {} ([{}][{}])", what, r.proj.size(),
                n * L.proj_dim, n, L.proj_dim);
  }
  if (!std::isfinite(r.salience_norm) || r.salience_norm < 0.0f) {
    throw_error("{}: salience_norm {} is not finite and >= 0", what, r.salience_norm);
  }
  const std::string_view summary = utf8_prefix(r.summary, kSummaryMax);

  std::lock_guard append_lock(m.append_mu);
  const uint64_t id = m.total;
  if (r.parent_episode_id != kNoEpisode && r.parent_episode_id >= id) {
    throw_error("{}: parent episode {} is not older than the new episode {}", what,
                r.parent_episode_id, id);
  }
  // 1. The slot: write_head, or the first slot after it not holding a pinned episode.
  uint32_t slot = 0;
  bool found = false;
  for (uint64_t i = 0; i < L.max_episodes && !found; ++i) {
    slot = static_cast<uint32_t>((m.write_head + i) % L.max_episodes);
    found = !(m.states[slot] == SlotState::live && (m.header_of(slot).flags & kEpisodePinned));
  }
  if (!found)
    throw_error("{}: all {} episodes are pinned; nothing can be evicted", what, L.max_episodes);
  // 2. Move write_head onto the slot first, so an interrupted append is always at write_head.
  if (slot != m.write_head) {
    m.publish(m.total, slot);
    std::unique_lock lock(m.state_mu);
    m.write_head = slot;
  }
  // 3. Evict the episode there: invisible in memory first, then on disk (token_count = 0).
  if (m.states[slot] != SlotState::empty) {
    if (m.states[slot] == SlotState::live) {
      std::unique_lock lock(m.state_mu);
      m.slot_of_id.erase(m.header_of(slot).episode_id);
      m.states[slot] = SlotState::empty;
    }
    const uint32_t zero = 0;
    m.pwrite_all(&zero, 4, L.entry_offset(slot) + offsetof(EpisodeHeader, token_count));
    m.durable_sync();
  }
  // 4. The record: slab block and index entry, then make them durable.
  EpisodeHeader eh{};
  eh.episode_id = id;
  eh.parent_episode_id = r.parent_episode_id;
  eh.created_timestamp = r.created_timestamp ? r.created_timestamp : now_ms();
  eh.start_clock = r.start_clock;
  eh.token_count = static_cast<uint32_t>(n);
  eh.salience_norm = r.salience_norm;
  eh.continuation_token = r.continuation_token;
  eh.flags = r.flags;
  eh.summary_len = static_cast<uint16_t>(summary.size());
  std::vector<uint8_t> entry(L.entry_bytes, 0);  // [64 header][hidden f16][pad]
  std::memcpy(entry.data(), &eh, sizeof eh);
  f32_to_f16_row(r.centroid.data(), reinterpret_cast<uint16_t*>(entry.data() + 64), L.hidden_size);
  // The sketch row of the stored f16 centroid, made here so the exclusive lock only copies it.
  const bool sketchable = L.hidden_size <= kInt8DotsMaxDim;
  std::vector<int8_t> c8(sketchable ? L.hidden_size : 0);  // [hidden_size]
  const SketchRow c8_row =
      sketchable ? CentroidSketch::quantize(reinterpret_cast<const uint16_t*>(entry.data() + 64),
                                            L.hidden_size, c8.data())
                 : SketchRow{};
  std::vector<uint8_t> block = build_block(L, id, r, summary);
  const uint32_t crc = record_checksum(L, entry.data(), block.data());
  std::memcpy(block.data() + offsetof(SlabBlockHeader, crc), &crc, 4);
  // The retrieval and lexical entries go first of all: the index entry that makes the slot
  // pending comes last, so a published episode always has every part.
  std::vector<uint8_t> ext = build_retrieval_entry(L, id, r);
  if (!ext.empty()) m.pwrite_all(ext.data(), ext.size(), L.ext_entry_offset(slot));
  if (L.has_lexical()) {  // version 3: the distinct tokens, for the lexical index of recall
    const std::vector<uint8_t> lex = lexical_entry(L, id, r.tokens);
    m.pwrite_all(lex.data(), lex.size(), L.lex_entry_offset(slot));
  }
  m.pwrite_all(block.data(), block.size(), L.block_offset(slot));
  m.pwrite_all(entry.data(), entry.size(), L.entry_offset(slot));
  m.durable_sync();
  // 5. Publish.
  const uint64_t next_head = (slot + 1ull) % L.max_episodes;
  m.publish(id + 1, next_head);
  {
    std::unique_lock lock(m.state_mu);
    if (m.sketch_ready.load(std::memory_order_relaxed)) m.sketch->set(slot, c8.data(), c8_row);
    m.states[slot] = SlotState::live;
    m.slot_of_id[id] = slot;
    if (!m.ext_state.empty()) {
      std::lock_guard ext_lock(m.ext_mu);
      m.ext_state[slot] = 1;  // written just now from verified data
    }
    m.total = id + 1;
    m.write_head = next_head;
  }
  // 6. Lineage: the parent, if still stored, counts one more child (a mutable field).
  if (r.parent_episode_id != kNoEpisode) {
    std::shared_lock lock(m.state_mu);
    auto it = m.slot_of_id.find(r.parent_episode_id);
    if (it != m.slot_of_id.end()) {
      std::lock_guard meta(m.meta_mu);
      const uint32_t children = m.header_of(it->second).child_count + 1;
      m.pwrite_all(&children, 4, L.entry_offset(it->second) + offsetof(EpisodeHeader, child_count));
    }
  }
  return id;
}

Episode EpisodicStore::read(uint64_t id) const {
  const Impl& m = *impl_;
  std::shared_lock lock(m.state_mu);
  const uint32_t slot = m.require_slot(id);
  // Read through the mapping, then out of it again (also when a check throws).
  Impl::UnmapAfter unmap{[&] { m.unmap_record(slot); }};
  m.check_record(slot);
  const StoreLayout& L = m.L;
  Episode e;
  e.slot = slot;
  e.header = m.header_at(slot);
  const size_t n = e.header.token_count;
  const uint8_t* b = m.block(slot);
  e.summary.assign(reinterpret_cast<const char*>(b + L.block_summary), e.header.summary_len);
  e.tokens.resize(n);
  // n is 0 when a writer in another process removed the record meanwhile: check_unchanged
  // below reports that; no copy from or to a null pointer before it.
  if (n > 0) std::memcpy(e.tokens.data(), b + L.block_tokens, 4 * n);
  e.centroid.resize(L.hidden_size);
  cpu::dequantize_row_f16(reinterpret_cast<const uint16_t*>(m.entry(slot) + 64), e.centroid.data(),
                          L.hidden_size);
  e.kv.resize(L.kv_bytes(n) / L.row_bytes * L.kv_dim);
  m.load_plane(b + L.block_kv, 2ull * L.num_layers * n, e.kv.data());
  m.check_unchanged(slot);  // a reader: the writer did not replace it while it was copied
  return e;
}

std::vector<int32_t> EpisodicStore::read_tokens(uint64_t id) const {
  const Impl& m = *impl_;
  std::shared_lock lock(m.state_mu);
  const uint32_t slot = m.require_slot(id);
  const size_t n = m.header_of(slot).token_count;
  if (n > m.L.max_tokens)
    throw_error("episodic: {}: episode {} claims {} tokens (at most {})", m.path, id, n,
                m.L.max_tokens);
  Impl::UnmapAfter unmap{[&] { m.unmap_record(slot); }};  // no page stays resident
  std::vector<int32_t> tokens(n);
  if (n > 0) std::memcpy(tokens.data(), m.block(slot) + m.L.block_tokens, 4 * n);
  m.check_unchanged(slot);
  return tokens;
}

void EpisodicStore::evict_pages(uint64_t id) const {
  const Impl& m = *impl_;
  const StoreLayout& L = m.L;
  std::shared_lock lock(m.state_mu);
  const uint32_t slot = m.require_slot(id);
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t b = L.block_offset(slot) + L.block_kv;
  const uint64_t e = b + L.kv_bytes(m.header_of(slot).token_count);
  const uint64_t begin = b & ~(page - 1),
                 end = std::min<uint64_t>((e + page - 1) & ~(page - 1), m.map_size);
  m.unmap_pages(begin, end - begin);
  ::posix_fadvise(m.fd, static_cast<off_t>(begin), static_cast<off_t>(end - begin),
                  POSIX_FADV_DONTNEED);
}


void EpisodicStore::record_access(uint64_t id, uint64_t now) {
  Impl& m = *impl_;
  if (m.options.read_only) return;  // a reader never writes the file (run --recall-only)
  std::shared_lock lock(m.state_mu);
  const uint32_t slot = m.require_slot(id);
  std::lock_guard meta(m.meta_mu);
  EpisodeHeader e = m.header_of(slot);
  e.access_count += 1;
  e.last_accessed = now;
  const uint64_t off = m.L.entry_offset(slot);
  m.pwrite_all(&e.last_accessed, 8, off + offsetof(EpisodeHeader, last_accessed));
  m.pwrite_all(&e.access_count, 4, off + offsetof(EpisodeHeader, access_count));
}

void EpisodicStore::set_pinned(uint64_t id, bool pinned) {
  Impl& m = *impl_;
  m.require_writable();
  std::lock_guard append_lock(m.append_mu);  // an append never evicts a slot being pinned
  std::shared_lock lock(m.state_mu);
  const uint32_t slot = m.require_slot(id);
  std::lock_guard meta(m.meta_mu);
  EpisodeHeader e = m.header_of(slot);
  e.flags = pinned ? (e.flags | kEpisodePinned) : (e.flags & ~kEpisodePinned);
  m.pwrite_all(&e.flags, 2, m.L.entry_offset(slot) + offsetof(EpisodeHeader, flags));
  m.durable_sync();
}

void EpisodicStore::remove(uint64_t id) {
  Impl& m = *impl_;
  m.require_writable();
  std::lock_guard append_lock(m.append_mu);
  uint32_t slot = 0;
  {
    std::unique_lock lock(m.state_mu);
    slot = m.require_slot(id);
    m.slot_of_id.erase(id);
    m.states[slot] = SlotState::empty;
  }
  // The same 4-byte write as an eviction (Write ordering, step 3): the slot is empty on disk.
  const uint32_t zero = 0;
  m.pwrite_all(&zero, 4, m.L.entry_offset(slot) + offsetof(EpisodeHeader, token_count));
  m.durable_sync();
}

uint64_t EpisodicStore::mapped_resident_bytes() const {
  return mapping_resident_bytes(impl_->map);
}

void EpisodicStore::sync() const {
  if (!impl_->options.read_only && ::fdatasync(impl_->fd) != 0) impl_->fail_errno("fdatasync");
}

}  // namespace channel
