// libFuzzer target for weight blocks: byte 0 picks a block type (every one Channel computes
// with), byte 1 a row count, the rest are the blocks. make_weight_matrix may refuse them
// (channel::Error: a non-finite scale, a size that is not whole rows); any it accepts are
// dequantized row by row and multiplied by a fixed activation row, on every path.
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "gguf/ggml_type.h"
#include "gguf/gguf_reader.h"
#include "backend/cpu/matmul.h"
#include "ops/weight.h"
#include "util/error.h"

namespace {

constexpr std::array<uint32_t, 10> kTypes = {8, 2, 3, 6, 7, 10, 11, 12, 13, 14};
volatile float g_sink;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint32_t type = kTypes[data[0] % kTypes.size()];
  const auto traits = channel::ggml_type_traits(type);
  const int64_t rows = 1 + data[1] % 4;
  const size_t body = size - 2;
  const int64_t row_blocks = static_cast<int64_t>(body) / traits->block_bytes / rows;
  if (row_blocks == 0) return 0;
  channel::TensorInfo t;
  t.name = "fuzz.weight";
  t.type_id = type;
  t.n_dims = 2;
  t.ne[0] = row_blocks * traits->block_elems;
  t.ne[1] = rows;
  t.n_bytes = static_cast<size_t>(rows * row_blocks * traits->block_bytes);
  t.data = data + 2;
  try {
    const channel::WeightMatrix w = channel::make_weight_matrix(t);
    std::vector<float> row(static_cast<size_t>(w.cols)), x(static_cast<size_t>(w.cols));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
    float h = 0.0f;
    for (int64_t r = 0; r < w.rows; ++r) {
      channel::dequantize_row(w, r, row.data());
      h += row[0];
    }
    static channel::ThreadPool pool(1);
    std::vector<float> y(static_cast<size_t>(w.rows * 5));
    channel::matmul(w, x.data(), 1, y.data(), pool);
    std::vector<float> x5(x.size() * 5);
    for (size_t i = 0; i < x5.size(); ++i) x5[i] = x[i % x.size()];
    channel::matmul(w, x5.data(), 5, y.data(), pool);  // the prompt path too
    channel::matmul_ref(w, x.data(), 1, y.data());
    g_sink = h + y[0];
  } catch (const channel::Error&) {
  }
  return 0;
}
