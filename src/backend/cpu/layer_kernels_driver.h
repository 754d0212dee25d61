// layer_kernels_driver.h: the parts of the layer kernels (layer_kernels.h) that are the same
// in every SIMD variant, written once over the variant's primitives: Vec and kLanes (a
// register of kLanes floats), load, store, splat, add, mul, div, neg, exp (simd::exp_ps) and
// sum_squares(x, n) (its own order of the double additions). Include only from
// layer_kernels_{avx512,avx2}.cpp, inside the variant's anonymous namespace, after those
// primitives. Tails take the scalar reference's arithmetic.

void rms_norm(const float* x, const float* w, int64_t n, float eps, float* y) {
  const float mean = static_cast<float>(sum_squares(x, n) / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  int64_t i = 0;
  const Vec vs = splat(scale);
  for (; i + kLanes <= n; i += kLanes) store(y + i, mul(mul(load(x + i), vs), load(w + i)));
  for (; i < n; ++i) y[i] = (x[i] * scale) * w[i];
}

void silu_glu(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
  const Vec one = splat(1.0f);
  for (; i + kLanes <= n; i += kLanes) {
    const Vec g = load(gate + i);
    store(out + i, mul(div(g, add(one, exp(neg(g)))), load(up + i)));
  }
  silu_glu_ref(gate + i, up + i, n - i, out + i);
}
