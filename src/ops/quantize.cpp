#include "ops/quantize.h"

#include <cstring>

#include "ops/fp16.h"
#include "ops/quant.h"
#include "ops/quant_legacy.h"
#include "util/error.h"

namespace channel {

void quantize_row(GgmlType type, const float* x, void* y, int64_t k) {
  auto* out = static_cast<uint8_t*>(y);
  switch (type) {
    case GgmlType::F32:
      std::memcpy(out, x, static_cast<size_t>(k) * sizeof(float));
      return;
    case GgmlType::F16:
    case GgmlType::BF16:
      for (int64_t i = 0; i < k; ++i) {
        const uint16_t h = type == GgmlType::F16 ? fp32_to_fp16(x[i]) : fp32_to_bf16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case GgmlType::Q8_0:
      return quantize_row_q8_0_weights_ref(x, y, k);
    case GgmlType::Q4_0:
      return quantize_row_q4_0_ref(x, y, k);
    case GgmlType::Q4_1:
      return quantize_row_q4_1_ref(x, y, k);
    case GgmlType::Q5_0:
      return quantize_row_q5_0_ref(x, y, k);
    case GgmlType::Q5_1:
      return quantize_row_q5_1_ref(x, y, k);
    case GgmlType::Q2_K:
      return quantize_row_q2_K(x, y, k);
    case GgmlType::Q3_K:
      return quantize_row_q3_K(x, y, k);
    case GgmlType::Q4_K:
      return quantize_row_q4_K(x, y, k);
    case GgmlType::Q5_K:
      return quantize_row_q5_K(x, y, k);
    case GgmlType::Q6_K:
      return quantize_row_q6_K(x, y, k);
  }
  throw_error("quantize: cannot write type {}", ggml_type_name(static_cast<uint32_t>(type)));
}

}  // namespace channel
