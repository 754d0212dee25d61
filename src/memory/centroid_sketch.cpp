// CentroidSketch: int8 quantization of centroids and queries, and the per-row upper bound of
// the exact cosine.
//
// Why the bound holds. Let q, c be the exact vectors (c: the f16 values), q^ = sq * q8 and
// c^ = sc * c8 their quantizations. Then q.c - q^.c^ = (q - q^).c + q^.(c - c^), so by
// Cauchy-Schwarz |q.c - q^.c^| <= ||q - q^|| ||c|| + ||q^|| ||c - c^||. q^.c^ = sq * sc * (q8.c8)
// and q8.c8 is an exact integer, so with t = q.c / (||q|| ||c||), the real cosine,
//   |t - a| <= ||q - q^|| / ||q|| + ||q^|| ||c - c^|| / (||q|| ||c||),  a = sq sc (q8.c8) / (||q||
//   ||c||).
// Every term is computed in f64 from exact inputs (relative error ~1e-12, absorbed below).
// The exact scan's f32 cosine e differs from t by its own rounding: its dot products and
// squared norms are f32 sums of at most dim products (a summation error of at most
// gamma_m * sum |q_i c_i| <= gamma_m ||q|| ||c||, gamma_m = m u / (1 - m u), u = 2^-24), then a
// few more rounded operations (sqrt, product, division, the f32 ||q||), so
// |e - t| <= 1.5 gamma_m + 4 u. The slack 4 gamma_m + 64 u with m = dim + 64 covers that and
// the f64 rounding with a wide margin. Hence a + bound >= e for every row.
#include "memory/centroid_sketch.h"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>

#include "backend/cpu/vec_kernels.h"
#include "memory/memory_kernels.h"
#include "ops/fp16.h"

namespace channel {

namespace {

constexpr double kRoundUp = 1.0 + 1e-9;  // over-states an f64 norm's own rounding error

// c8[i] = x[i] * 127 / max_abs rounded half away from zero, clamped to [-127, 127]; returns
// the scale max_abs / 127. (Any rounding would do: the error terms use the c8 it produced.)
// Written so that the compiler vectorizes it.
float quantize_values(const float* x, size_t dim, float max_abs, int8_t* c8) {
  if (max_abs == 0.0f) {
    std::memset(c8, 0, dim);
    return 0.0f;
  }
  const float inv = 127.0f / max_abs;
  for (size_t i = 0; i < dim; ++i) {
    const float v = x[i] * inv;
    const int32_t r = static_cast<int32_t>(v + (v >= 0.0f ? 0.5f : -0.5f));
    c8[i] = static_cast<int8_t>(std::clamp(r, -127, 127));
  }
  return max_abs / 127.0f;
}

// ||x|| and ||x - scale * x8|| in f64, rounded up. Eight partial sums, so the additions
// pipeline (and vectorize) without reassociating anything behind the compiler's back.
void error_norms(const float* x, const int8_t* x8, float scale, size_t dim, double* norm,
                 double* residual) {
  constexpr size_t kLanes = 8;
  double n2[kLanes] = {}, r2[kLanes] = {};
  const double sc = scale;
  size_t i = 0;
  for (; i + kLanes <= dim; i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) {
      const double v = x[i + j];
      const double r = v - sc * x8[i + j];
      n2[j] += v * v;
      r2[j] += r * r;
    }
  }
  for (; i < dim; ++i) {
    const double v = x[i];
    const double r = v - sc * x8[i];
    n2[0] += v * v;
    r2[0] += r * r;
  }
  double n = 0.0, r = 0.0;
  for (size_t j = 0; j < kLanes; ++j) {
    n += n2[j];
    r += r2[j];
  }
  *norm = std::sqrt(n);
  *residual = std::sqrt(r) * kRoundUp;
}

// max |x_i| of f16 bits as the bits of the largest magnitude (f16 magnitudes order like their
// bit patterns); >= 0x7C00 means an inf or NaN is present.
uint16_t max_abs_bits(const uint16_t* c, size_t dim) {
  uint16_t m = 0;
  for (size_t i = 0; i < dim; ++i) m = std::max<uint16_t>(m, c[i] & 0x7FFF);
  return m;
}

}  // namespace

std::optional<SketchQuery> quantize_query(std::span<const float> q) {
  const size_t dim = q.size();
  if (dim == 0 || dim > kInt8DotsMaxDim) return std::nullopt;
  float max_abs = 0.0f;
  for (float x : q) {
    if (!std::isfinite(x)) return std::nullopt;
    max_abs = std::max(max_abs, std::fabs(x));
  }
  SketchQuery s;
  s.q8.resize(dim);
  s.scale = quantize_values(q.data(), dim, max_abs, s.q8.data());
  error_norms(q.data(), s.q8.data(), s.scale, dim, &s.norm, &s.residual);
  // The exact scan divides by the f32 ||q||: keep it far from underflow and overflow, where
  // the relative error model of the slack would not hold.
  const float q_norm = static_cast<float>(s.norm);
  if (!(q_norm >= 1e-18f && q_norm <= 1e30f)) return std::nullopt;
  double q8_2 = 0.0;
  for (int8_t v : s.q8) q8_2 += static_cast<double>(v) * v;
  s.q8_norm = static_cast<double>(s.scale) * std::sqrt(q8_2) * kRoundUp;
  const double u = std::ldexp(1.0, -24);
  const double m = static_cast<double>(dim) + 64.0;
  const double gamma = m * u / (1.0 - m * u);  // m * u < 0.01 for dim <= kInt8DotsMaxDim
  s.slack = 4.0 * gamma + 64.0 * u;
  return s;
}

void CentroidSketch::Unmap::operator()(int8_t* p) const {
  ::munmap(p, bytes);
}

namespace {

// Anonymous memory (zeroed, page-aligned), in transparent huge pages where the kernel allows:
// the scan streams through all of it, and 2 MB pages spare it most TLB misses.
int8_t* map_rows(size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  ::madvise(p, bytes, MADV_HUGEPAGE);  // advisory: without it the pages are simply 4 KiB
  return static_cast<int8_t*>(p);
}

constexpr size_t kHugePage = size_t{2} << 20;

size_t mapped_bytes(size_t n_rows, size_t stride) {
  return std::max<size_t>((n_rows * stride + kHugePage - 1) / kHugePage * kHugePage, kHugePage);
}

}  // namespace

CentroidSketch::CentroidSketch(size_t n_rows, size_t dim)
    : n_rows_(n_rows),
      dim_(dim),
      stride_((dim + 63) / 64 * 64),
      data_(map_rows(mapped_bytes(n_rows_, stride_)), Unmap{mapped_bytes(n_rows_, stride_)}),
      info_(n_rows) {}

SketchRow CentroidSketch::quantize(const uint16_t* c, size_t dim, int8_t* c8) {
  thread_local std::vector<float> x;  // [dim] the row in f32 (exact: f16 widens losslessly)
  x.resize(dim);
  SketchRow row;
  const uint16_t max_bits = max_abs_bits(c, dim);
  if (max_bits >= 0x7C00) {
    std::memset(c8, 0, dim);
    return row;  // unbounded
  }
  cpu::dequantize_row_f16(c, x.data(), static_cast<int64_t>(dim));
  row.scale = quantize_values(x.data(), dim, fp16_to_fp32(max_bits), c8);
  error_norms(x.data(), c8, row.scale, dim, &row.norm, &row.residual);
  row.bounded = true;
  return row;
}

void CentroidSketch::set(size_t r, const int8_t* c8, const SketchRow& row) {
  std::memcpy(data_.get() + r * stride_, c8, dim_);
  info_[r] = row;
}

void CentroidSketch::quantize_into(size_t r, const uint16_t* c) {
  info_[r] = quantize(c, dim_, data_.get() + r * stride_);
}

void CentroidSketch::upper_bounds(const SketchQuery& q, size_t begin, size_t end,
                                  double* upper) const {
  constexpr size_t kBlock = 256;
  int32_t dots[kBlock];  // [kBlock] integer q8 . c8 of one block of rows
  const double q_rel = q.residual / q.norm * kRoundUp;
  for (size_t b = begin; b < end; b += kBlock) {
    const size_t n = std::min(kBlock, end - b);
    int8_dots(row(b), stride_, n, q.q8.data(), dim_, dots);
    for (size_t j = 0; j < n; ++j) {
      const SketchRow& c = info_[b + j];
      if (!c.bounded) {
        upper[b + j] = std::numeric_limits<double>::infinity();
      } else if (c.norm == 0.0) {
        upper[b + j] = 0.0;
      } else {
        const double denom = q.norm * c.norm;
        const double approx = dots[j] * (static_cast<double>(q.scale) * c.scale) / denom;
        upper[b + j] = approx + q_rel + q.q8_norm * c.residual / denom * kRoundUp + q.slack;
      }
    }
  }
}

}  // namespace channel
