// Q4_0 and Q5_0 weights regrouped for the AVX-512 kernels: the decode matvec and the prompt
// GEMM's panels (quant_matvec_avx512.cpp, matmul_kernels_avx512.cpp) read 16 rows at a time
// with the rows in the vector lanes. From the file's row-major blocks they had to gather 16
// scales (Q5_0: and 16 rows' fifth bits) and transpose 16 rows' nibbles in registers for every
// block; from groups they load them.
//
// Layout: per group of 16 rows (the last one padded by repeating the last row) and per
// 32-element block b, one record: the 16 rows' f16 scales (32 bytes); Q5_0: then the 16 rows'
// 4 bytes of fifth bits (64 bytes, row r in dword r); then four 64-byte parts, dword r of part
// g holding bytes 4g..4g+3 of row r's 16 nibble bytes. Records run block by block within a
// group, group after group. The arithmetic over them is the same as over the rows, so results
// are bit for bit the same.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/ggml_type.h"

namespace channel::cpu {

constexpr int64_t kGroupRows = 16;

// Whether the type has a grouped form (Q4_0, Q5_0).
bool groupable(GgmlType type);
// Bytes of one record (one block of 16 rows), and where in it the nibble parts start.
int64_t group_record_bytes(GgmlType type);
int64_t group_nibbles_at(GgmlType type);
// Bytes of the groups of a rows x cols matrix.
size_t quant_groups_bytes(GgmlType type, int64_t rows, int64_t cols);
// Writes the groups of rows x cols rows of the file's blocks (row r at data + r * row_bytes)
// to out.
void pack_quant_groups(GgmlType type, const uint8_t* data, size_t row_bytes, int64_t rows,
                       int64_t cols, uint8_t* out);
// Row `row` of a cols-wide matrix's groups back in the file's blocks, into out.
void quant_groups_row(GgmlType type, const uint8_t* groups, int64_t cols, int64_t row,
                      uint8_t* out);
// Whether this machine's matmul kernels read groups of this type (the AVX-512 VNNI ones; Q5_0
// also needs BITALG), so that a model should make them; CHANNEL_QUANT_GROUPS=0 turns them off
// (read once).
bool quant_groups_used(GgmlType type);

}  // namespace channel::cpu
