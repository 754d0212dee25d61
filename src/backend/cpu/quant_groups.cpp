// Q4_0 and Q5_0 weights regrouped for the AVX-512 kernels (quant_groups.h).
#include "backend/cpu/quant_groups.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "backend/cpu/matmul_kernels.h"
#include "ops/quant.h"

namespace channel::cpu {

namespace {

// The file's block: f16 scale, (Q5_0: 4 bytes of fifth bits), 16 nibble bytes.
int64_t file_block_bytes(GgmlType type) {
  return type == GgmlType::Q5_0 ? 22 : 18;
}

}  // namespace

bool groupable(GgmlType type) {
  return type == GgmlType::Q4_0 || type == GgmlType::Q5_0;
}

int64_t group_record_bytes(GgmlType type) {
  return group_nibbles_at(type) + 4 * 64;
}

int64_t group_nibbles_at(GgmlType type) {
  return type == GgmlType::Q5_0 ? 32 + 64 : 32;
}

size_t quant_groups_bytes(GgmlType type, int64_t rows, int64_t cols) {
  const int64_t groups = (rows + kGroupRows - 1) / kGroupRows;
  return static_cast<size_t>(groups * (cols / kQK) * group_record_bytes(type));
}

void pack_quant_groups(GgmlType type, const uint8_t* data, size_t row_bytes, int64_t rows,
                       int64_t cols, uint8_t* out) {
  const int64_t block = file_block_bytes(type), nibbles = group_nibbles_at(type);
  const int64_t record = group_record_bytes(type), nb = cols / kQK;
  const bool five = type == GgmlType::Q5_0;
  for (int64_t g0 = 0; g0 < rows; g0 += kGroupRows) {
    for (int64_t b = 0; b < nb; ++b, out += record) {
      for (int64_t i = 0; i < kGroupRows; ++i) {
        const uint8_t* in =
            data + static_cast<size_t>(std::min(g0 + i, rows - 1)) * row_bytes + b * block;
        std::memcpy(out + 2 * i, in, 2);
        if (five) std::memcpy(out + 32 + 4 * i, in + 2, 4);
        for (int part = 0; part < 4; ++part)
          std::memcpy(out + nibbles + 64 * part + 4 * i, in + block - 16 + 4 * part, 4);
      }
    }
  }
}

void quant_groups_row(GgmlType type, const uint8_t* groups, int64_t cols, int64_t row,
                      uint8_t* out) {
  const int64_t block = file_block_bytes(type), nibbles = group_nibbles_at(type);
  const int64_t record = group_record_bytes(type), nb = cols / kQK, i = row % kGroupRows;
  const bool five = type == GgmlType::Q5_0;
  const uint8_t* rec = groups + (row / kGroupRows) * nb * record;
  for (int64_t b = 0; b < nb; ++b, rec += record, out += block) {
    std::memcpy(out, rec + 2 * i, 2);
    if (five) std::memcpy(out + 2, rec + 32 + 4 * i, 4);
    for (int part = 0; part < 4; ++part)
      std::memcpy(out + block - 16 + 4 * part, rec + nibbles + 64 * part + 4 * i, 4);
  }
}

bool quant_groups_used(GgmlType type) {
  static const bool on = [] {
    const char* env = std::getenv("CHANNEL_QUANT_GROUPS");
    return !(env && std::string_view(env) == "0");
  }();
  return on && groupable(type) && matmul_reads_groups(type);
}

}  // namespace channel::cpu
