// Q4_0 weights regrouped for the AVX-512 kernels (q4_0_groups.h).
#include "backend/cpu/q4_0_groups.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "backend/cpu/matmul_kernels.h"
#include "ops/quant.h"

namespace channel::cpu {

size_t q4_0_groups_bytes(int64_t rows, int64_t cols) {
  const int64_t groups = (rows + kQ4GroupRows - 1) / kQ4GroupRows;
  return static_cast<size_t>(groups * (cols / kQK) * kQ4GroupRecordBytes);
}

void pack_q4_0_groups(const uint8_t* data, size_t row_bytes, int64_t rows, int64_t cols,
                      uint8_t* out) {
  constexpr int64_t kBlock = 18;  // f16 scale, 16 nibble bytes
  const int64_t nb = cols / kQK;
  for (int64_t g0 = 0; g0 < rows; g0 += kQ4GroupRows) {
    for (int64_t b = 0; b < nb; ++b, out += kQ4GroupRecordBytes) {
      for (int64_t i = 0; i < kQ4GroupRows; ++i) {
        const uint8_t* block =
            data + static_cast<size_t>(std::min(g0 + i, rows - 1)) * row_bytes + b * kBlock;
        std::memcpy(out + 2 * i, block, 2);
        for (int part = 0; part < 4; ++part)
          std::memcpy(out + 32 + 64 * part + 4 * i, block + 2 + 4 * part, 4);
      }
    }
  }
}

void q4_0_groups_row(const uint8_t* groups, int64_t cols, int64_t row, uint8_t* out) {
  const int64_t nb = cols / kQK, i = row % kQ4GroupRows;
  const uint8_t* rec = groups + (row / kQ4GroupRows) * nb * kQ4GroupRecordBytes;
  for (int64_t b = 0; b < nb; ++b, rec += kQ4GroupRecordBytes, out += 18) {
    std::memcpy(out, rec + 2 * i, 2);
    for (int part = 0; part < 4; ++part)
      std::memcpy(out + 2 + 4 * part, rec + 32 + 64 * part + 4 * i, 4);
  }
}

bool q4_0_groups_used() {
  static const bool used = [] {
    const char* env = std::getenv("CHANNEL_Q4_GROUPS");
    if (env && std::string_view(env) == "0") return false;
    return std::string_view(matmul_kernels_isa()) == "avx512";
  }();
  return used;
}

}  // namespace channel::cpu
