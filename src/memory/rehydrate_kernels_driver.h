// rehydrate_kernels_driver.h: the row entry points of the rehydration kernels (contract in
// rehydrate_kernels.h), written once over a variant's primitives: head(rot, x, head_dim, y)
// (one head, y may be x) and rows_fast(rot, src, n, out, dst) (the variant's whole-row path
// for the layouts it specialises; false where it has none). Include only from
// rehydrate_kernels_{avx512,avx2}.cpp, inside the variant's anonymous namespace, after those
// primitives.

template <typename T, typename U>
void rows(const HeadRotation* rot, const T* src, size_t n, const RowLayout& out, U* dst) {
  if (rows_fast(rot, src, n, out, dst)) return;
  for (size_t t = 0; t < n; ++t)
    for (uint32_t h = 0; h < out.n_heads; ++h)
      head(rot, src + (t * out.n_heads + h) * out.head_dim, out.head_dim,
           dst + t * out.token_stride + h * out.head_stride);
}

void f16_rows_to_f32(const HeadRotation* rot, const uint16_t* src, size_t n, const RowLayout& out,
                     float* dst) {
  rows(rot, src, n, out, dst);
}
void f32_rows_to_f32(const HeadRotation* rot, const float* src, size_t n, const RowLayout& out,
                     float* dst) {
  rows(rot, src, n, out, dst);
}
void f16_rows_to_f16(const HeadRotation* rot, const uint16_t* src, size_t n, uint32_t n_heads,
                     uint32_t head_dim, uint16_t* dst) {
  const size_t row = size_t{n_heads} * head_dim;
  rows(rot, src, n, RowLayout{n_heads, head_dim, row, head_dim, false}, dst);
}
