// quant_kernels.h: the row kernels of the block types that ops/matmul computes through one
// generic path (Q4_1, Q5_0, Q5_1 and the K-quants): for each, the activation format its
// dot takes (Q8_0, Q8_1 or Q8_K, as llama.cpp), that format's quantizer, the dot and the
// dequantizer. Same contracts as the *_ref functions of ops/quant_legacy.h and
// ops/quant_k.h; written once per ISA (quant_kernels_{avx512,avx2}.cpp over
// quant_kernels_simd.h, the references in quant_kernels.cpp) like vec_kernels.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "backend/cpu/vec_kernels_isa.h"
#include "gguf/ggml_type.h"

namespace channel::cpu {

struct QuantTypeKernels {
  int64_t block_elems;      // elements per weight block = per activation block (32 or 256)
  int64_t act_block_bytes;  // bytes of one activation block
  void (*quantize_act)(const float* x, void* y, int64_t k);
  float (*dot)(const void* w, const void* x, int64_t n_blocks);
  void (*dequantize)(const void* x, float* y, int64_t k);
  // out[t] = dot(w, x + t * x_stride) for t < nt <= max_tokens, each bit-identical to `dot`
  // (the weight row is unpacked once for all of them: the prompt path).
  void (*dot_multi)(const void* w, const void* x, size_t x_stride, int nt, int64_t n_blocks,
                    float* out);
  int max_tokens;
};

// The kernels for `type` in the best variant the CPU executes, or nullptr for types with
// their own paths (float, Q8_0, Q4_0).
const QuantTypeKernels* quant_type_kernels(GgmlType type);

// The scalar references' table (ops/quant_legacy.h, ops/quant_k.h).
const QuantTypeKernels* quant_type_kernels_ref(GgmlType type);

// One variant of the family, for simd_variants_test: the tables of one instruction set.
// Activation quantizers and dequantizers give the references' bits in every variant; the
// dots differ only in the order of the float additions.
struct QuantKernels {
  const char* isa;  // "avx512" (with VNNI), "avx2", "scalar"
  const QuantTypeKernels* (*for_type)(GgmlType type);
};

// The variants this build has and this CPU runs, best first (the last is the scalar one).
std::span<const QuantKernels> quant_kernel_variants();
const char* quant_kernels_isa();

// Each variant's tables by namespace, for the same ISA's matmul loops (matmul_kernels_*.cpp);
// declared where the translation unit is compiled for the ISA.
namespace scalar {
const QuantTypeKernels* quant_type_kernels(GgmlType type);
}
#if defined(CHANNEL_SIMD_AVX2)
namespace avx2 {
const QuantTypeKernels* quant_type_kernels(GgmlType type);
}
#endif
#if defined(CHANNEL_SIMD_VNNI)
namespace avx512 {
const QuantTypeKernels* quant_type_kernels(GgmlType type);
}
#endif
const QuantKernels* quant_kernels_avx512_variant();
const QuantKernels* quant_kernels_avx2_variant();

}  // namespace channel::cpu
