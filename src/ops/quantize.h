// quantize.h: converting f32 rows to any weight type Channel reads, for the model writers
// (`channel mkmodel --type`, `channel quantize`). Float types round to nearest even; the
// legacy block types use llama.cpp's reference roundings (ops/quant.h, ops/quant_legacy.h);
// the K-quants use Channel's own fit (quantize_k.cpp): the same formats, decoded by the same
// dequantizers, though not bit-identical to llama-quantize's output.
#pragma once

#include <cstdint>

#include "gguf/ggml_type.h"

namespace channel {

// K-quant weight quantizers; k a multiple of 256.
void quantize_row_q2_K(const float* x, void* y, int64_t k);
void quantize_row_q3_K(const float* x, void* y, int64_t k);
void quantize_row_q4_K(const float* x, void* y, int64_t k);
void quantize_row_q5_K(const float* x, void* y, int64_t k);
void quantize_row_q6_K(const float* x, void* y, int64_t k);

// Writes k values (a multiple of the type's block size) as `type` into y (its row bytes).
// Throws channel::Error for a type Channel cannot write.
void quantize_row(GgmlType type, const float* x, void* y, int64_t k);

}  // namespace channel
