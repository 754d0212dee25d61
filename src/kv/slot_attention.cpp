// slot_attention: checks the shape, then runs the best variant the CPU executes (AVX-512,
// AVX2 or scalar; each in its own file, compiled whenever the compiler can target it).
#include "kv/slot_attention.h"

#include "backend/cpu/simd_variants.h"

namespace channel {

const SlotAttentionVariant* slot_attention_avx512_variant();
const SlotAttentionVariant* slot_attention_avx2_variant();
const SlotAttentionVariant* slot_attention_scalar_variant();

std::span<const SlotAttentionVariant> slot_attention_variants() {
  static const std::vector<SlotAttentionVariant> all =
      simd::runnable_best_first(slot_attention_avx512_variant(), simd::cpu_runs_avx512(),
                                slot_attention_avx2_variant(), *slot_attention_scalar_variant());
  return all;
}

namespace {

const SlotAttentionVariant& best() {
  static const SlotAttentionVariant& b = slot_attention_variants().front();
  return b;
}

}  // namespace

const char* slot_attention_isa() {
  return best().isa;
}

void slot_attention(const SlotAttnShape& shape, const RopeFreqs& rope, const float* q,
                    const float* k, const float* v, std::span<const SlotRun> runs, float scale,
                    float* out, SlotAttnScratch& scratch, const RecallRowsF16& recall) {
  check_slot_attn_shape(shape, rope);
  check_recall_rows(shape, recall);
  best().fn(shape, rope, q, k, v, runs, scale, out, scratch, recall);
}

}  // namespace channel
