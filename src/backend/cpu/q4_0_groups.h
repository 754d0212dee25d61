// Q4_0 weights regrouped for the AVX-512 kernels: the decode matvec and the prompt GEMM's
// panels (quant_matvec_avx512.cpp, matmul_kernels_avx512.cpp) read 16 rows at a time with the
// rows in the vector lanes. From the file's row-major blocks they had to gather 16 scales and
// transpose 16 rows' nibbles in registers for every block; from groups they load them.
//
// Layout: per group of 16 rows (the last one padded by repeating the last row) and per
// 32-element block b, one 288-byte record: the 16 rows' f16 scales (32 bytes), then four
// 64-byte parts, dword r of part g holding bytes 4g..4g+3 of row r's 16 nibble bytes.
// Records run block by block within a group, group after group. The arithmetic over them is
// the same as over the rows, so results are bit for bit the same.
#pragma once

#include <cstddef>
#include <cstdint>

namespace channel::cpu {

constexpr int64_t kQ4GroupRows = 16;
constexpr int64_t kQ4GroupRecordBytes = 288;

// Bytes of the groups of a rows x cols Q4_0 matrix.
size_t q4_0_groups_bytes(int64_t rows, int64_t cols);
// Writes the groups of rows x cols Q4_0 rows (row r at data + r * row_bytes) to out.
void pack_q4_0_groups(const uint8_t* data, size_t row_bytes, int64_t rows, int64_t cols,
                      uint8_t* out);
// Row `row` of a cols-wide matrix's groups back in the file's form: cols / 32 blocks of an f16
// scale and 16 nibble bytes, into out.
void q4_0_groups_row(const uint8_t* groups, int64_t cols, int64_t row, uint8_t* out);
// Whether this machine's matmul kernels read Q4_0 groups (the AVX-512 VNNI ones), so that a
// model should make them; CHANNEL_Q4_GROUPS=0 turns them off (read once).
bool q4_0_groups_used();

}  // namespace channel::cpu
