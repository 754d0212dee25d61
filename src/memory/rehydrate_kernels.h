// rehydrate_kernels.h: the inner loops of recall rehydration, each with a scalar reference:
// stored K/V rows (f16, or f32 after dequantization) converted to f32 and written to a strided
// destination with each key head Givens-rotated on the way (one pass, one store per value), and
// (or, for an f16 recall tier, back to f16), and
// the f64 composition of precomputed rotations that gives cos/sin of Δ·θ without sin or cos.
// The fast versions are bit-identical to their references (explicit fma in both).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace channel {

// A rotation of one head in per-dimension form: y[d] = fma(x[d], c[d], x[p(d)] * s[d]), where
// p(d) is d's rotary partner (NORMAL: d ^ 1; NEOX: d ± n_rot/2) and s[d] carries the sign
// (-sin on the first of a pair, +sin on the second). Dimensions >= n_rot are copied.
struct HeadRotation {
  bool neox = true;
  uint32_t n_rot = 0;        // even, <= head_dim
  const float* c = nullptr;  // [n_rot]
  const float* s = nullptr;  // [n_rot]
};

// c/s of a HeadRotation from pair angles cos/sin [n_rot/2] (f64, rounded once to f32).
void expand_rotation_ref(bool neox, uint32_t n_rot, const double* cos, const double* sin, float* c,
                         float* s);
void expand_rotation(bool neox, uint32_t n_rot, const double* cos, const double* sin, float* c,
                     float* s);

// Where rows go: row t, head h lands at dst + t * token_stride + h * head_stride (floats).
struct RowLayout {
  uint32_t n_heads = 0;
  uint32_t head_dim = 0;
  size_t token_stride = 0;
  size_t head_stride = 0;
  // Non-temporal stores where the rows allow them (64-byte aligned whole vectors): for outputs
  // far larger than the caches, where a normal store first reads its line from memory.
  // The values written are the same either way.
  bool stream = false;
};

// Converts n rows of f16, src: [n][n_heads][head_dim], into `out` layout at dst, rotating every
// head by `rot` (nullptr: plain conversion, for values).
void f16_rows_to_f32_ref(const HeadRotation* rot, const uint16_t* src, size_t n,
                         const RowLayout& out, float* dst);
void f16_rows_to_f32(const HeadRotation* rot, const uint16_t* src, size_t n, const RowLayout& out,
                     float* dst);
// f16 rows to f16 rows, for a session's f16 recall tier: src and dst both [n][n_heads][head_dim]
// contiguous; every head rotated by `rot` as above (in f32) and rounded back to f16, nearest
// even (nullptr: a plain copy). dst may be src (in place); otherwise they must not overlap.
void f16_rows_to_f16_ref(const HeadRotation* rot, const uint16_t* src, size_t n, uint32_t n_heads,
                         uint32_t head_dim, uint16_t* dst);
void f16_rows_to_f16(const HeadRotation* rot, const uint16_t* src, size_t n, uint32_t n_heads,
                     uint32_t head_dim, uint16_t* dst);
// The same from f32 rows (a Q8_0 slab dequantized first).
void f32_rows_to_f32_ref(const HeadRotation* rot, const float* src, size_t n, const RowLayout& out,
                         float* dst);
void f32_rows_to_f32(const HeadRotation* rot, const float* src, size_t n, const RowLayout& out,
                     float* dst);

// n complex products in f64: (c[i], s[i]) <- (c[i], s[i]) * (C[i], S[i]), i.e.
// c' = fma(c, C, -(s * S)) and s' = fma(s, C, c * S): the rotation by a + b from those by a and b.
void compose_rotations_ref(double* c, double* s, const double* C, const double* S, size_t n);
void compose_rotations(double* c, double* s, const double* C, const double* S, size_t n);
// The product of n_factors >= 1 rotations, factor j given by C[j], S[j] ([n] each): (c, s) =
// factor 0, then composed with factors 1, 2, ... in order as compose_rotations does, so the
// result equals those calls bit for bit; the fast version keeps each lane in registers.
void chain_rotations_ref(const double* const* C, const double* const* S, int n_factors, size_t n,
                         double* c, double* s);
void chain_rotations(const double* const* C, const double* const* S, int n_factors, size_t n,
                     double* c, double* s);

// Which variant the fast functions use ("avx512", "avx2", "scalar").
const char* rehydrate_kernels_isa();

// Every variant compiled into this build that this CPU executes (rehydrate_kernels_avx512.cpp,
// rehydrate_kernels_avx2.cpp), the dispatched one first, the scalar references last.
struct RehydrateKernels {
  const char* isa;
  void (*f16_rows_to_f32)(const HeadRotation* rot, const uint16_t* src, size_t n,
                          const RowLayout& out, float* dst);
  void (*f32_rows_to_f32)(const HeadRotation* rot, const float* src, size_t n,
                          const RowLayout& out, float* dst);
  void (*f16_rows_to_f16)(const HeadRotation* rot, const uint16_t* src, size_t n,
                          uint32_t n_heads, uint32_t head_dim, uint16_t* dst);
  void (*compose_rotations)(double* c, double* s, const double* C, const double* S, size_t n);
  void (*chain_rotations)(const double* const* C, const double* const* S, int n_factors,
                          size_t n, double* c, double* s);
  void (*expand_rotation)(bool neox, uint32_t n_rot, const double* cos, const double* sin,
                          float* c, float* s);
};
std::span<const RehydrateKernels> rehydrate_kernel_variants();

}  // namespace channel
