// retrieval_kernels_driver.h: the retrieval scans (contract in retrieval_kernels.h), written
// once over the row primitives of a variant: widen(row, dim, out) (an f16 row to f32, out
// has room for kMaxDim + 16 values) and dot(a, b, dim). Include only from
// retrieval_kernels_{avx512,avx2}.cpp, inside the variant's anonymous namespace, after those
// primitives.

// Rows of up to this many values are widened into registers' worth of stack; longer ones
// take the reference (no model in sight has a head or retrieval dim above it).
constexpr size_t kMaxDim = 1024;

float key_match_score(const float* q, const uint16_t* keys, size_t n_blocks, size_t group, size_t R,
                      size_t dim) {
  if (dim > kMaxDim || group > 64) return key_match_score_ref(q, keys, n_blocks, group, R, dim);
  alignas(64) float k[kMaxDim + 16];
  float best[64];
  float total = 0.0f;
  for (size_t b = 0; b < n_blocks; ++b) {
    std::fill_n(best, group, -std::numeric_limits<float>::infinity());
    for (size_t r = 0; r < R; ++r) {
      widen(keys + (b * R + r) * dim, dim, k);  // once, for every query head of the group
      for (size_t g = 0; g < group; ++g)
        best[g] = std::max(best[g], dot(q + (b * group + g) * dim, k, dim));
    }
    for (size_t g = 0; g < group; ++g) total += best[g];
  }
  return total;
}

float proj_max_score(const float* c, const uint16_t* rows, size_t n, size_t dim) {
  if (dim > kMaxDim) return proj_max_score_ref(c, rows, n, dim);
  alignas(64) float e[kMaxDim + 16];
  float best = -std::numeric_limits<float>::infinity();
  for (size_t t = 0; t < n; ++t) {
    widen(rows + t * dim, dim, e);
    best = std::max(best, dot(c, e, dim));
  }
  return best;
}
