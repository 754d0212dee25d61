// GgmlType: the tensor element types of the GGUF/ggml ecosystem that Channel reads,
// with llama.cpp's numeric ids and block geometry (elements per block, bytes per block).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace channel {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  BF16 = 30,
};

struct GgmlTypeTraits {
  std::string_view name;
  int64_t block_elems;  // elements per block (1 for plain floats)
  int64_t block_bytes;  // bytes per block
};

// Traits of a supported type; std::nullopt for ids Channel cannot compute with.
std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t type_id);

// Block geometry of every type ggml still defines, including ones Channel cannot compute
// with (q6_K, iq2_xs, ...), so a GGUF listing them can still be validated and sized.
// std::nullopt for ids that were never defined or were removed (q4_2, q4_0_4_4, ...).
std::optional<GgmlTypeTraits> ggml_type_layout(uint32_t type_id);

// Name of any ggml type id, including ones Channel does not support ("q6_K", "type 99").
std::string ggml_type_name(uint32_t type_id);

// Bytes of one row of n elements; n must be a multiple of the block size.
inline size_t ggml_row_bytes(const GgmlTypeTraits& t, int64_t n) {
  return static_cast<size_t>(n / t.block_elems * t.block_bytes);
}

}  // namespace channel
