#include "model/quantize_model.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "ops/quant.h"
#include "ops/quantize.h"
#include "util/error.h"

namespace channel {
namespace {

bool is_float(uint32_t type_id) {
  const auto t = static_cast<GgmlType>(type_id);
  return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16;
}

void row_to_f32(GgmlType type, const uint8_t* src, int64_t n, float* dst) {
  switch (type) {
    case GgmlType::F16:
      return dequantize_row_f16_ref(reinterpret_cast<const uint16_t*>(src), dst, n);
    case GgmlType::BF16:
      return dequantize_row_bf16_ref(reinterpret_cast<const uint16_t*>(src), dst, n);
    default:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
  }
}

}  // namespace

QuantizeReport quantize_model(const GgufFile& in, const QuantMix& mix, GgufWriter& out,
                              ThreadPool& pool,
                              const std::function<void(const std::string&, GgmlType)>& on_tensor) {
  for (const GgufKv& kv : in.kvs()) {
    if (kv.key == "general.alignment") continue;  // the writer's own
    out.copy_kv(kv);
  }
  out.set_u32("general.file_type", mix.llama_ftype);
  out.set_u32("general.quantization_version", 2);

  QuantMixPlanner planner(mix, quant_mix_model(in));
  QuantizeReport report;
  for (const TensorInfo& t : in.tensors()) {
    const std::vector<int64_t> ne(t.ne, t.ne + std::max(t.n_dims, 1));
    report.bytes_in += t.n_bytes;
    const bool weight =
        t.n_dims == 2 && t.name.size() >= 6 && t.name.compare(t.name.size() - 6, 6, "weight") == 0;
    if (!weight) {
      out.add_tensor(t.name, static_cast<GgmlType>(t.type_id), ne,
                     std::vector<uint8_t>(t.data, t.data + t.n_bytes));
      report.bytes_out += t.n_bytes;
      ++report.n_copied;
      if (on_tensor) on_tensor(t.name, static_cast<GgmlType>(t.type_id));
      continue;
    }
    if (!is_float(t.type_id)) {
      throw_error("quantize: tensor '{}' is {}; the input must be f32, f16 or bf16", t.name,
                  ggml_type_name(t.type_id));
    }
    const GgmlType type = planner.next(t.name, t.ne[0]);
    const auto traits = *ggml_type_traits(static_cast<uint32_t>(type));
    const int64_t cols = t.ne[0], rows = t.ne[1];
    const size_t in_row = t.n_bytes / static_cast<size_t>(rows);
    const size_t out_row = ggml_row_bytes(traits, cols);
    std::vector<uint8_t> data(out_row * static_cast<size_t>(rows));  // [rows][out_row]
    pool.parallel_for(rows, [&](int64_t r0, int64_t r1, int) {
      std::vector<float> row(static_cast<size_t>(cols));
      for (int64_t r = r0; r < r1; ++r) {
        row_to_f32(static_cast<GgmlType>(t.type_id), t.data + static_cast<size_t>(r) * in_row, cols,
                   row.data());
        quantize_row(type, row.data(), data.data() + static_cast<size_t>(r) * out_row, cols);
      }
    });
    report.bytes_out += data.size();
    out.add_tensor(t.name, type, ne, std::move(data));
    ++report.n_quantized;
    if (on_tensor) on_tensor(t.name, type);
  }
  return report;
}

}  // namespace channel
