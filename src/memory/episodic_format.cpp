// Geometry, header CRC and record checksum of the .episodic.mem format.
#include "memory/episodic_format.h"

#include <cstring>

#include "memory/memory_kernels.h"
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
  if (L.file_size >= (1ull << 62)) {
    throw_error("{}: the store would take {} bytes, more than 2^62", what, L.file_size);
  }
  return L;
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

uint64_t fnv1a64(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace channel
