// The scalar variant of the matmul loops: the loop over row dots (matmul_dot_rows.h) with
// the references' dots, the portable fallback.
#include <algorithm>
#include <cstddef>

#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/quant_kernels.h"
#include "backend/cpu/vec_kernels_isa.h"
#include "ops/quant.h"

namespace channel::cpu {

namespace scalar {
namespace {
#include "backend/cpu/matmul_dot_rows.h"
}  // namespace

constexpr MatmulKernels kTable{"scalar", dot_row_granule, dot_rows};

}  // namespace scalar

const MatmulKernels* matmul_kernels_scalar_variant() {
  return &scalar::kTable;
}

}  // namespace channel::cpu
