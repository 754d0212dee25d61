// memory_kernels.h: the hot loops of the episodic store, each with its scalar reference:
// the centroid scan (dot products of FP16 centroids with an f32 query, the inner loop of
// cosine top-k), its int8 counterpart (the centroid sketch's scan) and f32 -> f16 row
// conversion for slab writes. CRC-32C lives in util/hash.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace channel {

// For each of n rows (row r starts at base + r * stride_bytes and holds `dim` f16 values):
// dots[r] = sum_i f16(row[i]) * q[i] and norms2[r] = sum_i f16(row[i])^2, accumulated in f32.
void centroid_dots_ref(const uint8_t* base, size_t stride_bytes, size_t n, const float* q,
                       size_t dim, float* dots, float* norms2);
void centroid_dots(const uint8_t* base, size_t stride_bytes, size_t n, const float* q, size_t dim,
                   float* dots, float* norms2);

// For each of n int8 rows (row r starts at rows + r * stride and holds `dim` values):
// dots[r] = sum_i row[i] * q[i], exact. q's values must lie in [-127, 127] and dim must be
// <= kInt8DotsMaxDim, so that every sum fits in int32.
constexpr size_t kInt8DotsMaxDim = 131072;
void int8_dots_ref(const int8_t* rows, size_t stride, size_t n, const int8_t* q, size_t dim,
                   int32_t* dots);
void int8_dots(const int8_t* rows, size_t stride, size_t n, const int8_t* q, size_t dim,
               int32_t* dots);

// Every int8_dots variant this build has and this CPU runs (the dispatched one first, the
// scalar reference last), so a test can check each against the reference.
using Int8DotsFn = void (*)(const int8_t*, size_t, size_t, const int8_t*, size_t, int32_t*);
struct Int8DotsVariant {
  const char* isa;  // "avx512vnni", "avx2", "scalar"
  Int8DotsFn fn;
};
size_t int8_dots_variants(const Int8DotsVariant** out);

// y[i] = fp32_to_fp16(x[i]) (round to nearest even), k elements.
void f32_to_f16_row_ref(const float* x, uint16_t* y, size_t k);
void f32_to_f16_row(const float* x, uint16_t* y, size_t k);

// Which variant centroid_dots dispatches to ("avx512", "avx2", "scalar").
const char* memory_kernels_isa();

// Every variant of centroid_dots and f32_to_f16_row compiled into this build that this CPU
// executes, the dispatched one first, the scalar references last.
struct CentroidKernels {
  const char* isa;
  void (*centroid_dots)(const uint8_t* base, size_t stride_bytes, size_t n, const float* q,
                        size_t dim, float* dots, float* norms2);
  void (*f32_to_f16_row)(const float* x, uint16_t* y, size_t k);
};
std::span<const CentroidKernels> centroid_kernel_variants();

}  // namespace channel
