#include "ops/weight.h"

#include <cstring>

#include "util/error.h"

namespace channel {
namespace {

// Byte offsets of the f16 scale and minimum inside one block of each block type (-1: none).
struct ScaleOffsets {
  int scale = -1, min = -1;
};

ScaleOffsets scale_offsets(GgmlType type) {
  switch (type) {
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
      return {0, -1};
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
      return {0, 2};
    case GgmlType::Q2_K:
      return {80, 82};
    case GgmlType::Q3_K:
      return {108, -1};
    case GgmlType::Q6_K:
      return {208, -1};
    default:
      return {};
  }
}

}  // namespace

int64_t first_nonfinite_scale_block(GgmlType type, const uint8_t* data, int64_t n_blocks,
                                    int64_t block_bytes) {
  const ScaleOffsets so = scale_offsets(type);
  if (so.scale < 0) return -1;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* blk = data + b * block_bytes;
    for (int off : {so.scale, so.min}) {
      if (off < 0) continue;
      uint16_t h;
      std::memcpy(&h, blk + off, sizeof(h));
      if ((h & 0x7c00) == 0x7c00) return b;  // f16 infinity or NaN
    }
  }
  return -1;
}

WeightMatrix make_weight_matrix(const TensorInfo& t) {
  const auto traits = ggml_type_traits(t.type_id);
  if (!traits) {
    throw_error(
        "weight {}: type {} is not supported (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_K "
        ".. q6_K are)",
        t.name, ggml_type_name(t.type_id));
  }
  if (t.n_dims < 1 || t.n_dims > 2 || t.ne[2] != 1 || t.ne[3] != 1) {
    throw_error("weight {}: expected a 2-D tensor, got {} dims [{}, {}, {}, {}]", t.name, t.n_dims,
                t.ne[0], t.ne[1], t.ne[2], t.ne[3]);
  }
  const int64_t cols = t.ne[0], rows = t.ne[1];
  if (cols <= 0 || rows <= 0) throw_error("weight {}: empty shape [{}, {}]", t.name, cols, rows);
  if (cols % traits->block_elems != 0) {
    throw_error("weight {}: ne[0] = {} is not a multiple of the {} block size {}", t.name, cols,
                traits->name, traits->block_elems);
  }
  const size_t row_bytes = ggml_row_bytes(*traits, cols);
  if (t.data == nullptr || t.n_bytes / row_bytes != static_cast<size_t>(rows) ||
      t.n_bytes % row_bytes != 0) {
    throw_error("weight {}: {} bytes of data do not hold {} rows of {} bytes", t.name, t.n_bytes,
                rows, row_bytes);
  }
  // Float rows are read as float / uint16_t arrays; block rows only byte-wise.
  const size_t align = traits->block_elems == 1 ? static_cast<size_t>(traits->block_bytes) : 1;
  if (reinterpret_cast<uintptr_t>(t.data) % align != 0) {
    throw_error("weight {}: data at offset {} of the tensor data section is not {}-byte aligned",
                t.name, t.offset, align);
  }
  const int64_t n_blocks = rows * (cols / traits->block_elems);
  const int64_t bad = first_nonfinite_scale_block(static_cast<GgmlType>(t.type_id), t.data,
                                                  n_blocks, traits->block_bytes);
  if (bad >= 0) {
    throw_error("weight {}: block {} (row {}) of type {} has a non-finite scale", t.name, bad,
                bad / (cols / traits->block_elems), traits->name);
  }
  return WeightMatrix{static_cast<GgmlType>(t.type_id), rows, cols, t.data, row_bytes};
}

}  // namespace channel
