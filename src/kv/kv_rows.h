// kv_rows.h: destinations for per-token K/V rows of several layers. KvRowTarget (f32): one
// base pointer per layer and two strides, so that dense [n_layers][n][n_heads][head_dim]
// buffers and f32 slot arenas [n_heads][n_slots][head_dim] (rows of consecutive slots) are the
// same thing to whoever fills them. KvRowsF16: an episode's rows in a session's f16 recall
// tier, where episodic recall writes rehydrated rows straight from the store.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace channel {

// Token t, head h of layer l goes to k[l] + offset + t * token_stride + h * head_stride (the
// head's head_dim floats are contiguous); the same for v.
struct KvRowTarget {
  std::span<float*const> k, v;  // [n_layers] base of each layer's K / V
  size_t offset = 0;            // floats from a base to token 0, head 0
  size_t token_stride = 0;      // floats from token t to t + 1
  size_t head_stride = 0;       // floats from head h to h + 1 of one token
  size_t max_tokens = 0;        // rows the target holds
};

// Rows of slots first_slot, first_slot + 1, ... of slot arenas [n_heads][n_slots][head_dim]
// (bases: one arena per layer), n_tokens of them.
inline KvRowTarget slot_arena_rows(std::span<float* const> k, std::span<float* const> v,
                                   uint32_t n_slots, uint32_t head_dim, uint32_t first_slot,
                                   uint32_t n_tokens) {
  return {k, v, size_t{first_slot} * head_dim, head_dim, size_t{n_slots} * head_dim, n_tokens};
}

// One episode's rows in an f16 recall tier (a session keeps recall slots as f16 bits,
// token-major, [n_recall][n_heads * head_dim] per layer): in each layer, max_tokens
// consecutive rows of row_dim values from the given pointer on, the layout of the episode's
// K and V planes in a .episodic.mem slab, so that a read can land there directly.
struct KvRowsF16 {
  std::span<uint16_t*const> k, v;  // [n_layers] the episode's first row in each layer
  size_t row_dim = 0;              // f16 values per row
  size_t max_tokens = 0;           // rows each layer's target holds
  // When set: called with runs of consecutive planes (plane p: layer p / 2's keys for even p,
  // values for odd p), each plane once, as soon as their rows are in place, from whichever
  // thread wrote them, so that a device can start copying them while the rest is read.
  // Whether the record verified is known only when the writer returns.
  std::function<void(size_t first_plane, size_t n_planes)> ready = nullptr;
};

// An episode's f16 K/V where it is stored (the store's mapping, held unchanged while this is
// handed out): n_planes = 2 * layers planes of n_tokens rows of row_dim values, consecutive
// from `planes`, plane p layer p / 2's keys (even p, as stored) or values (odd p). `region`
// (region_bytes long) is the mapped memory around them, which stays valid while the store is
// open: a device may page-lock it once for many recalls. verify(plane_crc) checks the whole
// record against each plane's crc32c(0, plane) and throws when it is damaged; prepare(), when
// set, does the part of that check that needs no plane (reading the record's head) ahead, so a
// device can run it while its copy runs (verify does it itself otherwise).
struct StoredKvF16 {
  const uint16_t* planes = nullptr;
  size_t n_tokens = 0, row_dim = 0, n_planes = 0;
  const void* region = nullptr;
  size_t region_bytes = 0;
  std::function<void(std::span<const uint32_t> plane_crc)> verify;
  std::function<void()> prepare;
  size_t plane_values() const { return n_tokens * row_dim; }
  size_t bytes() const { return n_planes * plane_values() * 2; }
};

// Dense buffers k, v: [n_layers][n_tokens][n_heads * head_dim] as a target. Owns its pointer
// arrays (the target's spans point into them), so it is neither copied nor moved.
class DenseKvRows {
 public:
  DenseKvRows(float* k, float* v, uint32_t n_layers, size_t n_tokens, size_t row_dim,
              uint32_t head_dim)
      : k_(n_layers), v_(n_layers) {
    for (uint32_t l = 0; l < n_layers; ++l) {
      k_[l] = k + l * n_tokens * row_dim;
      v_[l] = v + l * n_tokens * row_dim;
    }
    target_ = {k_, v_, 0, row_dim, head_dim, n_tokens};
  }
  DenseKvRows(const DenseKvRows&) = delete;
  DenseKvRows& operator=(const DenseKvRows&) = delete;
  const KvRowTarget& target() const { return target_; }

 private:
  std::vector<float*> k_, v_;  // [n_layers]
  KvRowTarget target_;
};

}  // namespace channel
