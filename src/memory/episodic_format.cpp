// Geometry, header CRC and record checksum of the .episodic.mem format.
#include "memory/episodic_format.h"

#include <algorithm>
#include <cstring>

#include "util/hash.h"
#include "util/error.h"

namespace channel {

const char* slab_type_name(SlabType t) {
  return t == SlabType::f16 ? "f16" : "q8_0";
}

namespace {

uint64_t checked_mul(uint64_t a, uint64_t b, const std::string& what) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) throw_error("{}: geometry overflows 64 bits", what);
  return r;
}
uint64_t checked_add(uint64_t a, uint64_t b, const std::string& what) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) throw_error("{}: geometry overflows 64 bits", what);
  return r;
}

}  // namespace

StoreLayout make_layout(const StoreGeometry& g, const std::string& what) {
  if (g.num_layers == 0) throw_error("{}: num_layers is 0", what);
  if (g.hidden_size == 0) throw_error("{}: hidden_size is 0", what);
  if (g.kv_dim == 0) throw_error("{}: kv_dim is 0", what);
  if (g.max_episodes == 0) throw_error("{}: max_episodes is 0", what);
  if (g.max_tokens == 0) throw_error("{}: max_tokens_per_episode is 0", what);
  if (g.slab_type == SlabType::q8_0 && g.kv_dim % 32 != 0) {
    throw_error("{}: kv_dim {} is not a multiple of 32, as Q8_0 slabs need", what, g.kv_dim);
  }
  StoreLayout L;
  L.slab_type = g.slab_type;
  L.num_layers = g.num_layers;
  L.hidden_size = g.hidden_size;
  L.kv_dim = g.kv_dim;
  L.max_episodes = g.max_episodes;
  L.max_tokens = g.max_tokens;
  L.row_bytes = g.slab_type == SlabType::f16 ? 2ull * g.kv_dim : g.kv_dim / 32ull * 34ull;
  L.entry_bytes = round_up64(64ull + 2ull * g.hidden_size);
  L.slab_offset =
      round_up64(checked_add(64, checked_mul(g.max_episodes, L.entry_bytes, what), what));
  L.block_kv = round_up64(L.block_tokens + 4ull * g.max_tokens);
  const uint64_t kv_max =
      checked_mul(checked_mul(2ull * g.num_layers, g.max_tokens, what), L.row_bytes, what);
  L.block_stride = round_up64(checked_add(L.block_kv, kv_max, what));
  L.file_size = checked_add(L.slab_offset, checked_mul(g.max_episodes, L.block_stride, what), what);
  if (g.ext_kinds != 0) {
    if (g.ext_kinds & ~kRetrievalKnown)
      throw_error("{}: unknown retrieval kinds {:#x}", what, g.ext_kinds);
    L.version = kEmemVersionExt;
    L.ext_kinds = g.ext_kinds;
    L.ext_offset = L.file_size;
    uint64_t off = 64;
    if (L.has_keys()) {
      if (g.head_dim == 0 || g.kv_dim % g.head_dim != 0)
        throw_error("{}: head_dim {} does not divide kv_dim {}", what, g.head_dim, g.kv_dim);
      if (g.keys_per_head == 0 || g.keys_per_head > kMaxKeysPerHead)
        throw_error("{}: {} keys per head, outside 1..{}", what, g.keys_per_head, kMaxKeysPerHead);
      L.head_dim = g.head_dim;
      L.key_heads = g.kv_dim / g.head_dim;
      L.keys_per_head = g.keys_per_head;
      off = round_up64(checked_add(off, checked_mul(2, L.keys_values(), what), what));
    }
    if (L.has_proj()) {
      if (g.proj_dim == 0 || g.proj_dim > kMaxProjDim)
        throw_error("{}: retrieval dim {} outside 1..{}", what, g.proj_dim, kMaxProjDim);
      L.proj_dim = g.proj_dim;
      L.ext_proj = off;
      off = round_up64(
          checked_add(off, checked_mul(2ull * g.proj_dim, g.max_tokens, what), what));
    }
    L.ext_entry_bytes = off;
    L.file_size = checked_add(checked_add(L.file_size, 64, what),
                              checked_mul(g.max_episodes, L.ext_entry_bytes, what), what);
  }
  if (g.lexical) {
    if (g.ext_kinds == 0) throw_error("{}: a lexical section needs a retrieval section", what);
    L.version = kEmemVersionLex;
    L.lex_offset = L.file_size;
    L.lex_entry_bytes = round_up64(16ull + 4ull * g.max_tokens);
    L.file_size = checked_add(checked_add(L.file_size, 64, what),
                              checked_mul(g.max_episodes, L.lex_entry_bytes, what), what);
  }
  if (L.file_size >= (1ull << 62)) {
    throw_error("{}: the store would take {} bytes, more than 2^62", what, L.file_size);
  }
  return L;
}

RetrievalSectionHeader retrieval_section_header(const StoreLayout& L) {
  RetrievalSectionHeader r{};
  r.magic = kRetrievalMagic;
  r.kinds = L.ext_kinds;
  r.key_layers = L.num_layers;
  r.key_heads = L.key_heads;
  r.head_dim = L.head_dim;
  r.keys_per_head = L.keys_per_head;
  r.proj_dim = L.proj_dim;
  r.proj_tokens = L.has_proj() ? L.max_tokens : 0;
  r.entry_bytes = L.ext_entry_bytes;
  r.keys_offset = static_cast<uint32_t>(L.has_keys() ? L.ext_keys : 0);
  r.proj_offset = static_cast<uint32_t>(L.has_proj() ? L.ext_proj : 0);
  r.crc = crc32c(0, &r, 60);
  return r;
}

uint32_t retrieval_entry_crc(const StoreLayout& L, const uint8_t* entry) {
  return crc32c(crc32c(0, entry, 12), entry + 16, L.ext_entry_bytes - 16);
}

LexicalSectionHeader lexical_section_header(const StoreLayout& L) {
  LexicalSectionHeader r{};
  r.magic = kLexicalMagic;
  r.max_tokens = L.max_tokens;
  r.entry_bytes = L.lex_entry_bytes;
  r.crc = crc32c(0, &r, 60);
  return r;
}

uint32_t lexical_entry_crc(const uint8_t* entry, uint32_t count) {
  return crc32c(crc32c(0, entry, 12), entry + 16, 4ull * count);
}

std::vector<uint8_t> lexical_entry(const StoreLayout& L, uint64_t episode_id,
                                   std::span<const int32_t> tokens) {
  std::vector<int32_t> t(tokens.begin(), tokens.end());
  std::sort(t.begin(), t.end());
  t.erase(std::unique(t.begin(), t.end()), t.end());
  std::vector<uint8_t> e(L.lex_entry_bytes, 0);
  LexicalEntryHeader h{};
  h.episode_id = episode_id;
  h.count = static_cast<uint32_t>(t.size());
  std::memcpy(e.data(), &h, sizeof h);
  if (!t.empty()) std::memcpy(e.data() + sizeof h, t.data(), 4 * t.size());
  h.crc = lexical_entry_crc(e.data(), h.count);
  std::memcpy(e.data(), &h, sizeof h);
  return e;
}

uint32_t header_crc(const FileHeader& h) {
  const auto* p = reinterpret_cast<const uint8_t*>(&h);
  return crc32c(crc32c(0, p, 32), p + 48, 12);
}

uint32_t record_checksum_head(const StoreLayout& L, const uint8_t* entry, const uint8_t* block) {
  EpisodeHeader eh;
  std::memcpy(&eh, entry, sizeof eh);
  eh.last_accessed = 0;
  eh.access_count = 0;
  eh.child_count = 0;
  eh.flags &= static_cast<uint16_t>(~kEpisodePinned);
  uint32_t c = crc32c(0, &eh, sizeof eh);
  c = crc32c(c, entry + sizeof eh, 2ull * L.hidden_size);
  return crc32c(c, block + 8, L.block_tokens + 4ull * eh.token_count - 8);
}

uint32_t record_checksum(const StoreLayout& L, const uint8_t* entry, const uint8_t* block) {
  EpisodeHeader eh;
  std::memcpy(&eh, entry, sizeof eh);
  return crc32c(record_checksum_head(L, entry, block), block + L.block_kv,
                L.kv_bytes(eh.token_count));
}


}  // namespace channel
