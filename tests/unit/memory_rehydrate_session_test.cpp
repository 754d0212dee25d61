// The fused recall path into a live session: rehydrating straight into RingSession recall
// slots is bit-identical to the two-step path (dense buffers, then inject_recall's copy), an
// empty recall tier changes nothing, and a failing fill leaves no episode active.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/thread_pool.h"
#include "gguf/gguf_writer.h"
#include "kv/kv_rows.h"
#include "memory/episodic_store.h"
#include "memory/memory_attachment.h"
#include "gguf/model_signature.h"
#include "memory/rehydrate_kernels.h"
#include "memory/rerotate.h"
#include "memory_test_util.h"
#include "model/model.h"
#include "model/random_model.h"
#include "ops/fp16.h"
#include "runtime/ring_session.h"
#include "support/micro_model.h"
#include "util/aligned_vector.h"
#include "util/error.h"

namespace channel {
namespace {

// --- into a live session -----------------------------------------------------------------

// The shared micro model (tests/support) as llama with `layers` layers of head dim 16.
std::shared_ptr<const Model> micro_model(int layers) {
  RandomModelSpec s = test::micro_model_spec(Arch::llama, 1);
  s.layers = layers;
  s.head_dim = 16;
  return test::load_model(s);
}

TEST(MemoryRehydrate, SessionFusedRecallEqualsTwoStepInject) {
  const auto model = micro_model(2);
  test::ScratchDir dir;
  StoreOptions o = test::not_durable();
  EpisodicStore store = EpisodicStore::create(
      dir.file("s.mem"), session_store_geometry(*model, 8, 16), model_id_hash(model->gguf()), o);
  std::vector<uint64_t> ids;
  for (size_t n : {5u, 16u}) {
    const test::SyntheticEpisode ep(store.layout(), 40 + n, n);
    ids.push_back(store.append(ep.record(300)));
  }
  const std::vector<int32_t> anchors = {2, 40, 41, 42};
  RingSession fused(model, test::micro_ring_config()), twostep(model, test::micro_ring_config());
  for (RingSession* s : {&fused, &twostep}) {
    s->append(SpanType::system, anchors);
    s->seal();
  }
  MemoryConfig mc;
  mc.consolidate = false;
  MemoryAttachment mem(fused, store, mc);  // recall() is the fused path
  const ModelHparams& hp = model->hparams();
  RotaryDims r;
  r.style =
      fused.rope_global().style;
  r.head_dim = static_cast<uint32_t>(hp.head_dim);
  r.n_heads = static_cast<uint32_t>(hp.n_head_kv);
  r.n_rot = fused.rope_global().n_rot;
  r.inv_freq = fused.rope_global().inv_freq;
  const RotationTable table(r);
  for (uint64_t id : ids) {
    const RecallResult res = mem.recall(id);
    const uint32_t n = res.n_tokens;
    const double delta = static_cast<double>(res.stored_pos) - 300.0;
    const size_t values = fused.global_layers().size() * size_t{n} * r.row_dim();
    std::vector<float> k(values), v(values);
    DenseKvRows dense(k.data(), v.data(), static_cast<uint32_t>(fused.global_layers().size()), n,
                      r.row_dim(), r.head_dim);
    RehydrateOptions ro;
    ro.tables = {&table, 1};
    store.rehydrate(id, {&r, 1}, delta, dense.target(), ro);
    EXPECT_EQ(twostep.inject_recall(id, n, res.stored_pos, k, v), res.slot_begin);
  }
  for (int il : fused.global_layers()) {
    const auto a = fused.layer_k(il), b = twostep.layer_k(il);
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size_bytes())) << "K layer " << il;
    const auto c = fused.layer_v(il), d = twostep.layer_v(il);
    ASSERT_EQ(0, std::memcmp(c.data(), d.data(), c.size_bytes())) << "V layer " << il;
    const auto rk = fused.recall_k(il), rk2 = twostep.recall_k(il);
    ASSERT_EQ(0, std::memcmp(rk.data(), rk2.data(), rk.size_bytes())) << "recall K " << il;
    const auto rv = fused.recall_v(il), rv2 = twostep.recall_v(il);
    ASSERT_EQ(0, std::memcmp(rv.data(), rv2.data(), rv.size_bytes())) << "recall V " << il;
  }
  const std::vector<int32_t> next = {50, 51, 52};
  const auto la = fused.append(SpanType::user, next);
  const std::vector<float> fa(la.begin(), la.end());
  const auto lb = twostep.append(SpanType::user, next);
  EXPECT_EQ(fa, std::vector<float>(lb.begin(), lb.end()));
}

// A geometry without recall slots has no f16 tier, and an empty tier changes nothing: the
// same tokens give the same logits with 0 and with 32 recall slots.
TEST(MemoryRehydrate, EmptyRecallTierChangesNothing) {
  const auto model = micro_model(2);
  RingSessionConfig none = test::micro_ring_config(), some = test::micro_ring_config();
  none.ring.n_recall = 0;
  RingSession a(model, none), b(model, some);
  for (RingSession* s : {&a, &b}) {
    s->append(SpanType::system, std::vector<int32_t>{2, 40, 41, 42});
    s->seal();
  }
  for (int i = 0; i < 4; ++i) {
    const std::vector<int32_t> t = {50 + i, 60 + i, 70 + i};
    const auto la = a.append(SpanType::user, t);
    const std::vector<float> fa(la.begin(), la.end());
    const auto lb = b.append(SpanType::user, t);
    ASSERT_EQ(fa, std::vector<float>(lb.begin(), lb.end())) << i;
  }
  for (int il : a.global_layers()) EXPECT_TRUE(a.recall_k(il).empty());
  EXPECT_THROW(a.inject_recall(1, 1, 4, [](const KvRowsF16&) {}), Error);
}

TEST(MemoryRehydrate, FailingFillLeavesNoEpisodeActive) {
  const auto model = micro_model(1);
  RingSession s(model, test::micro_ring_config());
  const std::vector<int32_t> anchors = {2, 40, 41, 42};
  s.append(SpanType::system, anchors);
  s.seal();
  const uint32_t used = s.ring().recall_used();
  EXPECT_THROW(s.inject_recall(7, 4, 4, [](const KvRowsF16&) { throw Error("damaged"); }), Error);
  EXPECT_EQ(s.ring().recall_used(), used);
  EXPECT_TRUE(s.ring().recall_episodes().empty());
  // The id can be activated afterwards.
  const size_t values = s.global_layers().size() * 4 * model->hparams().n_head_kv *
                        static_cast<size_t>(model->hparams().head_dim);
  std::vector<float> k(values, 0.5f), v(values, 0.25f);
  EXPECT_NO_THROW(s.inject_recall(7, 4, 4, k, v));
  EXPECT_EQ(s.ring().recall_episodes().size(), 1u);
}

}  // namespace
}  // namespace channel
