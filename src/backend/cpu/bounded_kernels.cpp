// The bounded group kernel: the scalar reference and the run-time dispatch to the best
// variant the CPU executes (bounded_kernels_avx512.cpp, bounded_kernels_avx2.cpp).
#include "backend/cpu/bounded_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/simd_variants.h"

namespace channel::cpu {

const BoundedKernelVariant* bounded_kernel_avx512_variant();
const BoundedKernelVariant* bounded_kernel_avx2_variant();

void bounded_group_attend_ref(const BoundedGroupTask& t) {
  const int hd = t.head_dim, half = t.half, S = t.n_sinks, n = t.n_sinks + t.len;
  for (int h = 0; h < t.n_q; ++h) {
    const float* q = t.q + static_cast<size_t>(h) * hd;
    float* row = t.scores + static_cast<size_t>(h) * t.score_stride;
    for (int s = 0; s < S; ++s) {
      const float* k = t.sink_k + static_cast<size_t>(s) * hd;
      float acc = 0.0f;
      for (int i = 0; i < hd; ++i) acc += q[i] * k[i];
      row[s] = acc * t.scale;
    }
    for (int d = 0; d < t.len; ++d) {
      const float* k = t.keys[d];
      const float* c = t.cos + static_cast<size_t>(d) * half;
      const float* sn = t.sin + static_cast<size_t>(d) * half;
      float acc = 0.0f;
      for (int i = 0; i < half; ++i) {  // (R q)·k per pair
        const float q0 = q[i], q1 = q[i + half], k0 = k[i], k1 = k[i + half];
        acc += c[i] * (q0 * k0 + q1 * k1) + sn[i] * (q0 * k1 - q1 * k0);
      }
      for (int i = 2 * half; i < hd; ++i) acc += q[i] * k[i];
      row[S + d] = acc * t.scale;
    }
    float mx = -std::numeric_limits<float>::infinity();
    for (int i = 0; i < n; ++i) mx = std::max(mx, row[i]);
    float sum = 0.0f;
    for (int i = 0; i < n; ++i) {
      row[i] = std::exp(row[i] - mx);
      sum += row[i];
    }
    float* o = t.out + static_cast<size_t>(h) * hd;
    std::fill(o, o + hd, 0.0f);
    for (int s = 0; s < S; ++s) {
      const float* v = t.sink_v + static_cast<size_t>(s) * hd;
      for (int i = 0; i < hd; ++i) o[i] += row[s] * v[i];
    }
    for (int d = 0; d < t.len; ++d) {
      const float* v = t.values[d];
      for (int i = 0; i < hd; ++i) o[i] += row[S + d] * v[i];
    }
    const float inv = 1.0f / sum;
    for (int i = 0; i < hd; ++i) o[i] *= inv;
  }
}

namespace {

const BoundedKernelVariant kScalar{"scalar", bounded_group_attend_ref};

}  // namespace

std::span<const BoundedKernelVariant> bounded_kernel_variants() {
  static const std::vector<BoundedKernelVariant> all =
      simd::runnable_best_first(bounded_kernel_avx512_variant(), simd::cpu_runs_avx512(),
                                bounded_kernel_avx2_variant(), kScalar);
  return all;
}

namespace {

const BoundedKernelVariant& best() {
  static const BoundedKernelVariant& b = bounded_kernel_variants().front();
  return b;
}

}  // namespace

const char* bounded_kernel_isa() {
  return best().isa;
}

void bounded_group_attend(const BoundedGroupTask& task) {
  best().fn(task);
}

}  // namespace channel::cpu
