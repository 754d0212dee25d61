// slot_attention_kernel.h: the driver of slot_attention (contract in slot_attention.h), written
// once over the row primitives of a variant: dot(q, row, n), axpy(y, row, w, n) for f32 and
// f16 rows and softmax_numerators(s, n). Include only from slot_attention_{avx512,avx2,
// scalar}.cpp, inside the variant's namespace, after those primitives. The shape and the
// recall rows are checked by the dispatcher.
//
// Per KV head it scores every key for all query heads that share it (each K row is read
// once), takes the softmax, and accumulates V rows the same way.

void slot_attention_kernel(const SlotAttnShape& shape, const RopeFreqs& rope, const float* q,
                           const float* k, const float* v, std::span<const SlotRun> runs,
                           float scale, float* out, SlotAttnScratch& scratch,
                           const RecallRowsF16& recall) {
  const uint32_t hd = shape.head_dim, rep = shape.n_head / shape.n_head_kv;
  const size_t head_stride = size_t{shape.n_slots} * hd;  // one KV head of the arena
  const size_t q_stride = size_t{shape.n_head} * hd;      // one rotated query
  size_t n_keys = 0;
  for (const SlotRun& r : runs) n_keys += r.count;
  scratch.cs.resize(runs.size() * rope.n_rot);
  scratch.qrot.resize(runs.size() * q_stride);
  scratch.scores.resize(rep * n_keys);
  scratch.inv_sum.resize(rep);
  for (size_t r = 0; r < runs.size(); ++r) {
    float* cs = scratch.cs.data() + r * rope.n_rot;
    rope_cos_sin(rope, runs[r].rope_pos, cs);
    rope_rotate(rope, cs, q, scratch.qrot.data() + r * q_stride, shape.n_head, hd);
  }
  for (uint32_t g = 0; g < shape.n_head_kv; ++g) {
    const float* kh = k + g * head_stride;
    const float* vh = v + g * head_stride;
    // Recall row 0 of KV head g; a slot >= n_slots is a recall slot (slots are trusted).
    const uint16_t* rk = recall.count ? recall.k + size_t{g} * hd : nullptr;
    const uint16_t* rv = recall.count ? recall.v + size_t{g} * hd : nullptr;
    float* o = out + size_t{g} * rep * hd;  // the rep query heads of KV head g
    for (size_t d = 0; d < size_t{rep} * hd; ++d) o[d] = 0.0f;
    if (n_keys == 0) continue;
    float* sc = scratch.scores.data();  // [rep][n_keys]
    size_t j = 0;
    for (size_t r = 0; r < runs.size(); ++r) {
      const float* qg = scratch.qrot.data() + r * q_stride + size_t{g} * rep * hd;
      for (uint32_t i = 0; i < runs[r].count; ++i, ++j) {
        const uint32_t s = runs[r].slots[i];
        if (s < shape.n_slots) {
          const float* krow = kh + size_t{s} * hd;
          for (uint32_t h = 0; h < rep; ++h)
            sc[h * n_keys + j] = scale * dot(qg + h * hd, krow, hd);
        } else {
          const uint16_t* krow = rk + (s - recall.first) * recall.row_stride;
          for (uint32_t h = 0; h < rep; ++h)
            sc[h * n_keys + j] = scale * dot(qg + h * hd, krow, hd);
        }
      }
    }
    float* inv = scratch.inv_sum.data();
    for (uint32_t h = 0; h < rep; ++h) inv[h] = 1.0f / softmax_numerators(sc + h * n_keys, n_keys);
    j = 0;
    for (size_t r = 0; r < runs.size(); ++r)
      for (uint32_t i = 0; i < runs[r].count; ++i, ++j) {
        const uint32_t s = runs[r].slots[i];
        if (s < shape.n_slots) {
          const float* vrow = vh + size_t{s} * hd;
          for (uint32_t h = 0; h < rep; ++h)
            axpy(o + h * hd, vrow, sc[h * n_keys + j] * inv[h], hd);
        } else {
          const uint16_t* vrow = rv + (s - recall.first) * recall.row_stride;
          for (uint32_t h = 0; h < rep; ++h)
            axpy(o + h * hd, vrow, sc[h * n_keys + j] * inv[h], hd);
        }
      }
  }
}
