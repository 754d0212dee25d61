// WeightMatrix: a read-only view of one 2-D GGUF weight tensor as the matmul kernels see it
// (type, shape, row stride, data in the mapping). Building one validates type and shape.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/ggml_type.h"
#include "gguf/gguf_reader.h"

namespace channel {

// rows = ne[1] outputs, cols = ne[0] inputs; row r starts at data + r * row_bytes.
struct WeightMatrix {
  GgmlType type;
  int64_t rows;
  int64_t cols;
  const uint8_t* data;  // [rows][row_bytes]
  size_t row_bytes;
  // Q4_0/Q5_0 on CPUs whose kernels read them: the same weights as 16-row groups
  // (backend/cpu/quant_groups.h), which the model owns; null otherwise. data stays valid.
  const uint8_t* groups = nullptr;
};

// Throws channel::Error naming the tensor when its type is not one Channel computes with, it
// is not 2-D (ne[2] == ne[3] == 1), cols is not a whole number of blocks, its byte size disagrees
// with its shape, its data is misaligned for its element type, or a block's f16 scale or minimum is
// infinite or NaN.
WeightMatrix make_weight_matrix(const TensorInfo& t);

// Index of the first of n_blocks blocks of `type` whose f16 scale or minimum is not finite;
// -1 when all are (and for float types).
int64_t first_nonfinite_scale_block(GgmlType type, const uint8_t* data, int64_t n_blocks,
                                    int64_t block_bytes);

}  // namespace channel
