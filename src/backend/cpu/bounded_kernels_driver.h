// bounded_kernels_driver.h: the bounded group kernel (bounded_kernels.h) written once over a
// SIMD variant's primitives: kW (lanes, and keys per block), Vec, Mask and lanes(n) (the low
// min(max(n, 0), kW) lanes); zero, splat, load(p), load(p, m) (zeros outside m),
// load_or(fill, m, p) (fill outside m), store(p, m, v), keep(v, m) (zeros outside m), add,
// sub, mul, max, fmadd(a, b, c) = a b + c, fmsub(a, b, c) = a b − c, reduce_add, reduce_max,
// exp (simd::exp_ps); and for a block of key scores acc_slot(i) (where key i's accumulator
// goes) and reduce_keys(acc) (lane i: the sum of key i's accumulator). Include only from
// bounded_kernels_{avx512,avx2}.cpp, inside the variant's anonymous namespace, after those
// primitives.

int round_up(int n) {
  return (n + kW - 1) / kW * kW;
}

// dst (hdp floats, zero past hd) <- R(−d) k: pairs (i, i + half) as (c k0 + s k1, c k1 − s k0),
// the other dims copied. half = 0 copies the row.
void rotate_row(const float* k, const float* c, const float* s, int half, int hd, int hdp,
                float* dst) {
  for (int p = 0; p < half; p += kW) {
    const Mask m = lanes(half - p);
    const Vec k0 = load(k + p, m), k1 = load(k + half + p, m);
    const Vec vc = load(c + p, m), vs = load(s + p, m);
    store(dst + p, m, fmadd(vc, k0, mul(vs, k1)));
    store(dst + half + p, m, fmsub(vc, k1, mul(vs, k0)));
  }
  for (int p = 2 * half; p < hdp; p += kW)
    store(dst + p, lanes(hdp - p), load(k + p, lanes(hd - p)));
}

// Scores of nk <= kW keys (rows of kb) for every head: row h, columns [col, col + nk).
void score_block(const BoundedGroupTask& t, const float* qbuf, int hdp, const float* kb, int nk,
                 int col) {
  const Vec scale = splat(t.scale);
  for (int h = 0; h < t.n_q; ++h) {
    const float* qh = qbuf + static_cast<size_t>(h) * hdp;
    Vec acc[kW];
    for (int i = 0; i < kW; ++i) {
      Vec a = zero();
      if (i < nk) {
        const float* kr = kb + static_cast<size_t>(i) * hdp;
        for (int c = 0; c < hdp; c += kW) a = fmadd(load(qh + c), load(kr + c), a);
      }
      acc[acc_slot(i)] = a;
    }
    float* row = t.scores + static_cast<size_t>(h) * t.score_stride + col;
    store(row, lanes(nk), mul(reduce_keys(acc), scale));
  }
}

// row[0, n) <- e^(row − max); returns 1 / their sum.
float softmax_row(float* row, int n) {
  const Vec neg_inf = splat(-std::numeric_limits<float>::infinity());
  Vec vmax = neg_inf;
  for (int i = 0; i < n; i += kW) vmax = max(vmax, load_or(neg_inf, lanes(n - i), row + i));
  const Vec mx = splat(reduce_max(vmax));
  Vec vsum = zero();
  for (int i = 0; i < n; i += kW) {
    const Mask m = lanes(n - i);
    const Vec e = exp(sub(load(row + i, m), mx));
    store(row + i, m, e);
    vsum = add(vsum, keep(e, m));
  }
  return 1.0f / reduce_add(vsum);
}

// o[0, hd) <- inv · (Σ_s p_s sink_v_s + Σ_d p_d values_d), 4 kW dims at a time in registers.
void weighted_sum(const BoundedGroupTask& t, const float* p, float inv, float* o) {
  const int hd = t.head_dim;
  for (int c0 = 0; c0 < hd; c0 += 4 * kW) {
    const Mask m0 = lanes(hd - c0), m1 = lanes(hd - c0 - kW), m2 = lanes(hd - c0 - 2 * kW),
               m3 = lanes(hd - c0 - 3 * kW);
    Vec a0 = zero(), a1 = a0, a2 = a0, a3 = a0;
    auto add_row = [&](float w_, const float* v) {
      const Vec w = splat(w_);
      a0 = fmadd(w, load(v, m0), a0);
      a1 = fmadd(w, load(v + kW, m1), a1);
      a2 = fmadd(w, load(v + 2 * kW, m2), a2);
      a3 = fmadd(w, load(v + 3 * kW, m3), a3);
    };
    for (int s = 0; s < t.n_sinks; ++s) add_row(p[s], t.sink_v + static_cast<size_t>(s) * hd + c0);
    for (int d = 0; d < t.len; ++d) add_row(p[t.n_sinks + d], t.values[d] + c0);
    const Vec vinv = splat(inv);
    store(o + c0, m0, mul(a0, vinv));
    store(o + c0 + kW, m1, mul(a1, vinv));
    store(o + c0 + 2 * kW, m2, mul(a2, vinv));
    store(o + c0 + 3 * kW, m3, mul(a3, vinv));
  }
}

void attend(const BoundedGroupTask& t) {
  const int hd = t.head_dim, hdp = round_up(hd);
  thread_local std::vector<float> qbuf, kbuf;  // grow, never shrink: decoding allocates nothing
  if (qbuf.size() < static_cast<size_t>(t.n_q) * hdp) qbuf.resize(static_cast<size_t>(t.n_q) * hdp);
  if (kbuf.size() < static_cast<size_t>(kW) * hdp) kbuf.resize(static_cast<size_t>(kW) * hdp);
  for (int h = 0; h < t.n_q; ++h) {  // zero-padded queries
    rotate_row(t.q + static_cast<size_t>(h) * hd, nullptr, nullptr, 0, hd, hdp,
               qbuf.data() + static_cast<size_t>(h) * hdp);
  }
  for (int b0 = 0; b0 < t.n_sinks; b0 += kW) {
    const int nk = std::min(kW, t.n_sinks - b0);
    for (int i = 0; i < nk; ++i) {
      rotate_row(t.sink_k + static_cast<size_t>(b0 + i) * hd, nullptr, nullptr, 0, hd, hdp,
                 kbuf.data() + static_cast<size_t>(i) * hdp);
    }
    score_block(t, qbuf.data(), hdp, kbuf.data(), nk, b0);
  }
  for (int d0 = 0; d0 < t.len; d0 += kW) {
    const int nk = std::min(kW, t.len - d0);
    for (int i = 0; i < nk; ++i) {
      const size_t d = static_cast<size_t>(d0 + i);
      rotate_row(t.keys[d], t.cos + d * t.half, t.sin + d * t.half, t.half, hd, hdp,
                 kbuf.data() + static_cast<size_t>(i) * hdp);
    }
    score_block(t, qbuf.data(), hdp, kbuf.data(), nk, t.n_sinks + d0);
  }
  for (int h = 0; h < t.n_q; ++h) {
    float* row = t.scores + static_cast<size_t>(h) * t.score_stride;
    const float inv = softmax_row(row, t.n_sinks + t.len);
    weighted_sum(t, row, inv, t.out + static_cast<size_t>(h) * hd);
  }
}
