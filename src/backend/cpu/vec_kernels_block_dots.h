// vec_kernels_block_dots.h: the Q8_0 and Q4_0 row dots of vec_kernels.h, written once over a
// variant's primitives: dot_i8(w, x) (32 int8 products summed into 8 int32 lanes, exactly),
// unpack_q4(block quants) (32 nibbles as int8 - 8), f16_at and hsum (backend/cpu/simd.h).
// Per block: the exact integer dot, then one f32 FMA with d_w * d_x, in block order. Include
// only from vec_kernels_{avx512,avx2}.cpp, inside the variant's namespace, after those
// primitives.

float dot_q8_0(const void* w, const void* x, int64_t n_blocks) {
  const uint8_t* pw = static_cast<const uint8_t*>(w);
  const uint8_t* px = static_cast<const uint8_t*>(x);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b, pw += sizeof(BlockQ8_0), px += sizeof(BlockQ8_0)) {
    const __m256i qw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pw + 2));
    const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(px + 2));
    const __m256 d = _mm256_set1_ps(f16_at(pw) * f16_at(px));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot_i8(qw, qx)), d, acc);
  }
  return hsum(acc);
}

float dot_q4_0(const void* w, const void* x, int64_t n_blocks) {
  const uint8_t* pw = static_cast<const uint8_t*>(w);
  const uint8_t* px = static_cast<const uint8_t*>(x);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b, pw += sizeof(BlockQ4_0), px += sizeof(BlockQ8_0)) {
    const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(px + 2));
    const __m256 d = _mm256_set1_ps(f16_at(pw) * f16_at(px));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot_i8(unpack_q4(pw + 2), qx)), d, acc);
  }
  return hsum(acc);
}
