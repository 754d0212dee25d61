#include "ops/weight.h"

#include "util/error.h"

namespace channel {

WeightMatrix make_weight_matrix(const TensorInfo& t) {
  const auto traits = ggml_type_traits(t.type_id);
  if (!traits) {
    throw_error("weight {}: type {} is not supported (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_K .. q6_K are)", t.name,
                ggml_type_name(t.type_id));
  }
  if (t.n_dims < 1 || t.n_dims > 2 || t.ne[2] != 1 || t.ne[3] != 1) {
    throw_error("weight {}: expected a 2-D tensor, got {} dims [{}, {}, {}, {}]", t.name, t.n_dims,
                t.ne[0], t.ne[1], t.ne[2], t.ne[3]);
  }
  const int64_t cols = t.ne[0], rows = t.ne[1];
  if (cols <= 0 || rows <= 0) throw_error("weight {}: empty shape [{}, {}]", t.name, cols, rows);
  if (cols % traits->block_elems != 0) {
    throw_error("weight {}: ne[0] = {} is not a multiple of the {} block size {}", t.name, cols,
                traits->name, traits->block_elems);
  }
  const size_t row_bytes = ggml_row_bytes(*traits, cols);
  if (t.data == nullptr || t.n_bytes / row_bytes != static_cast<size_t>(rows) ||
      t.n_bytes % row_bytes != 0) {
    throw_error("weight {}: {} bytes of data do not hold {} rows of {} bytes", t.name, t.n_bytes,
                rows, row_bytes);
  }
  // Float rows are read as float / uint16_t arrays; block rows only byte-wise.
  const size_t align = traits->block_elems == 1 ? static_cast<size_t>(traits->block_bytes) : 1;
  if (reinterpret_cast<uintptr_t>(t.data) % align != 0) {
    throw_error("weight {}: data at offset {} of the tensor data section is not {}-byte aligned",
                t.name, t.offset, align);
  }
  return WeightMatrix{static_cast<GgmlType>(t.type_id), rows, cols, t.data, row_bytes};
}

}  // namespace channel
