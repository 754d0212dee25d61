// matmul_dot_rows.h: the matmul loop over row dots, written once over a variant's row kernels:
// dot_f32, dot_f16, dot_bf16, dot_q8_0, dot_q4_0 (vec_kernels_isa.h) and quant_type_kernels
// (quant_kernels.h) of the namespace it is included in. The whole loop of the AVX2 and scalar
// variants; the AVX-512 one runs it for the block types without loops of their own. Include
// only from matmul_kernels_{avx512,avx2,scalar}.cpp, inside the variant's namespace.

// Rows per unit of work when splitting among threads.
inline int64_t dot_row_granule(GgmlType, int64_t) {
  return 16;
}

// The block types of quant_kernels.h: each weight row is unpacked once per group of up to
// max_tokens tokens (dot_multi), whose outputs are the bits `dot` gives for each alone.
inline void quant_type_rows(const QuantTypeKernels& qk, const MatmulWeights& w,
                            const MatmulInput& x, int64_t r0, int64_t r1, float* y,
                            int64_t y_stride) {
  const int64_t n_blocks = w.cols / qk.block_elems;
  float out[16];
  for (int64_t rb = r0; rb < r1; rb += 16) {  // 16 rows stay in cache while the tokens pass
    const int64_t re = std::min(rb + 16, r1);
    for (int64_t t0 = 0; t0 < x.n; t0 += qk.max_tokens) {
      const int nt = static_cast<int>(std::min<int64_t>(qk.max_tokens, x.n - t0));
      const uint8_t* xq = x.xq + static_cast<size_t>(t0) * x.xq_row_bytes;
      for (int64_t r = rb; r < re; ++r) {
        qk.dot_multi(w.data + static_cast<size_t>(r) * w.row_bytes, xq, x.xq_row_bytes, nt,
                     n_blocks, out);
        for (int t = 0; t < nt; ++t) y[(t0 + t) * y_stride + r] = out[t];
      }
    }
  }
}

// y[t * y_stride + r] = row r of w · token t, for r in [r0, r1) and every token. Out of line:
// the AVX-512 variant's matmul_rows keeps its decode and GEMM paths compact.
[[gnu::noinline]] inline void dot_rows(const MatmulWeights& w, const MatmulInput& x, int64_t r0, int64_t r1, float* y,
                     int64_t y_stride) {
  if (const QuantTypeKernels* qk = quant_type_kernels(w.type))
    return quant_type_rows(*qk, w, x, r0, r1, y, y_stride);
  const int64_t nb = w.cols / kQK;
  const size_t xq_row_bytes = x.xq_row_bytes;
  // Blocks of 16 rows stay in L1 while every token passes over them.
  for (int64_t rb = r0; rb < r1; rb += 16) {
    const int64_t re = std::min(rb + 16, r1);
    for (int64_t t = 0; t < x.n; ++t) {
      const float* xf = x.xf + t * w.cols;
      const uint8_t* xq = x.xq + t * xq_row_bytes;
      for (int64_t r = rb; r < re; ++r) {
        const uint8_t* wr = w.data + static_cast<size_t>(r) * w.row_bytes;
        const auto* w16 = reinterpret_cast<const uint16_t*>(wr);
        float v = 0.0f;
        switch (w.type) {
          case GgmlType::F32:
            v = dot_f32(reinterpret_cast<const float*>(wr), xf, w.cols);
            break;
          case GgmlType::F16:
            v = dot_f16(w16, xf, w.cols);
            break;
          case GgmlType::BF16:
            v = dot_bf16(w16, xf, w.cols);
            break;
          case GgmlType::Q8_0:
            v = dot_q8_0(wr, xq, nb);
            break;
          case GgmlType::Q4_0:
            v = dot_q4_0(wr, xq, nb);
            break;
          default:  // quant_type_rows
            break;
        }
        y[t * y_stride + r] = v;
      }
    }
  }
}
