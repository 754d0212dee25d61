// centroid_sketch.h: CentroidSketch, an in-memory int8 copy of the episodic index's FP16
// centroids with per-row error terms, and the bound that lets the top-k scan read one byte per
// value yet return exactly what the FP16 scan returns (docs/memory-format.md, "Recall").
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace channel {

// One row's quantization c ~= scale * c8, with ||c|| and ||c - scale * c8|| of the f16 values.
struct SketchRow {
  float scale = 0.0f;     // max |c_i| / 127 (0 for an all-zero row)
  double norm = 0.0;      // ||c||, in f64
  double residual = 0.0;  // >= ||c - scale * c8||, in f64 and rounded up
  bool bounded = false;   // false: c holds inf/NaN (no bound: the row is always rescored)
};

// The query's quantization q ~= scale * q8 (q8 in [-127, 127]) and its error terms.
struct SketchQuery {
  std::vector<int8_t> q8;  // [dim]
  float scale = 0.0f;
  double norm = 0.0;      // ||q|| in f64
  double q8_norm = 0.0;   // >= ||scale * q8||
  double residual = 0.0;  // >= ||q - scale * q8||
  double slack = 0.0;     // f32 rounding of the exact scan's cosine, see quantize_query
};

// Quantizes q for a sketch scan, or nullopt when the bound cannot be trusted for it (a
// non-finite value, ||q|| outside [1e-18, 1e30], or dim beyond kInt8DotsMaxDim); the caller
// then scans the FP16 centroids instead.
std::optional<SketchQuery> quantize_query(std::span<const float> q);

class CentroidSketch {
 public:
  CentroidSketch(size_t n_rows, size_t dim);  // every row zero and unbounded until set
  CentroidSketch(const CentroidSketch&) = delete;
  CentroidSketch& operator=(const CentroidSketch&) = delete;

  size_t rows() const { return n_rows_; }
  size_t dim() const { return dim_; }

  // Row r := the quantization of `c` ([dim] f16 bits). quantize() does the work without
  // touching the sketch (so it can run outside a lock); set() stores its result.
  static SketchRow quantize(const uint16_t* c, size_t dim, int8_t* c8);
  void set(size_t r, const int8_t* c8, const SketchRow& row);
  void quantize_into(size_t r, const uint16_t* c);

  const int8_t* row(size_t r) const { return data_.get() + r * stride_; }  // [dim]
  const SketchRow& info(size_t r) const { return info_[r]; }

  // For rows [begin, end): upper[r] >= the cosine the exact FP16 scan computes for row r
  // against q (+inf for an unbounded row, 0 for a zero row, whose exact cosine is 0).
  void upper_bounds(const SketchQuery& q, size_t begin, size_t end, double* upper) const;

 private:
  struct Unmap {
    size_t bytes = 0;
    void operator()(int8_t* p) const;
  };
  size_t n_rows_, dim_, stride_;           // stride_: dim rounded up to 64 bytes
  std::unique_ptr<int8_t[], Unmap> data_;  // [n_rows][stride], page-aligned
  std::vector<SketchRow> info_;            // [n_rows]
};

}  // namespace channel
