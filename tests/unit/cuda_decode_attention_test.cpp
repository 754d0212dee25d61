// decode_attention (cuda_decode_attention.cu): splits merged by the last block to finish,
// against attend_ref; and its one-token form that finishes its own q and k, against
// qkv_finish followed by the plain form, bit for bit (a verify's tokens take the latter, a
// decode step the former, and their logits must agree exactly).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "cuda_test_util.h"

#if defined(CHANNEL_HAS_CUDA)

#include "backend/cuda/cuda_kernels.h"
#include "ops/attention.h"
#include "ops/fp16.h"

namespace channel {
namespace {

using test::from_device;
using test::nmse;
using test::randn;
using test::to_device;

// A cache of n_kv heads of cap slots filled through qkv_finish (no norms, no rotation) from
// random rows; `held` are the keys and values as the cache holds them, on the host.
struct FilledCache {
  int n_head, n_kv, hd;
  int64_t cap, ld;
  bool f32;
  cuda::DeviceBuffer k, v;
  std::vector<float> hk, hv;

  FilledCache(int n_head_, int n_kv_, int hd_, int64_t cap_, bool f32_, uint32_t seed)
      : n_head(n_head_),
        n_kv(n_kv_),
        hd(hd_),
        cap(cap_),
        ld((n_head_ + 2 * n_kv_) * hd_),
        f32(f32_) {
    const std::vector<float> qkv = randn(static_cast<size_t>(cap * ld), seed, 0.7f);
    std::vector<int32_t> ids(static_cast<size_t>(cap));
    std::iota(ids.begin(), ids.end(), 0);
    cuda::DeviceBuffer dqkv = to_device(qkv), dids = to_device(ids);
    const size_t elem = f32 ? 4 : 2, n = static_cast<size_t>(n_kv * cap * hd);
    k = cuda::DeviceBuffer(n * elem, "k");
    v = cuda::DeviceBuffer(n * elem, "v");
    const cuda::QkvLayout l{n_head, n_kv, hd, hd, ld, f32};
    cuda::qkv_finish(l, dqkv.as<float>(), static_cast<int>(cap), nullptr, nullptr, 1e-6f,
                     cuda::make_rope(cuda::RopeMode::normal, 0, 1e4f, 1.0f, nullptr),
                     dids.as<int32_t>(), dids.as<int32_t>(), k.get(), v.get(), cap, nullptr);
    hk.resize(n);
    hv.resize(n);
    for (int64_t s = 0; s < cap; ++s)
      for (int h = 0; h < n_kv; ++h)
        for (int i = 0; i < hd; ++i) {
          const size_t at = (static_cast<size_t>(h) * cap + s) * hd + i;
          hk[at] = held(qkv[static_cast<size_t>(s * ld + (n_head + h) * hd + i)]);
          hv[at] = held(qkv[static_cast<size_t>(s * ld + (n_head + n_kv + h) * hd + i)]);
        }
  }
  float held(float x) const { return f32 ? x : fp16_to_fp32(fp32_to_fp16(x)); }
};

// The kernel's scratch: the splits' parts and the zeroed arrival counters.
struct Scratch {
  cuda::DeviceBuffer part, arrivals;
  Scratch(int n, int n_head, int n_kv, int hd, int splits)
      : part(cuda::attention_part_floats(n, n_head, hd, splits) * 4, "part"),
        arrivals(to_device(std::vector<uint32_t>(static_cast<size_t>(n * n_kv), 0u))) {}
  std::vector<uint32_t> counters(int n, int n_kv) const {
    return from_device<uint32_t>(arrivals, static_cast<size_t>(n * n_kv));
  }
};

cuda::AttnArgs args_for(const FilledCache& c, int n, const float* q, int64_t ldq,
                        const cuda::DeviceBuffer& table, const cuda::DeviceBuffer& first,
                        const cuda::DeviceBuffer& count, cuda::DeviceBuffer& out, int splits,
                        Scratch& scratch) {
  cuda::AttnArgs a;
  a.q = q;
  a.ldq = ldq;
  a.k_cache = c.k.get();
  a.v_cache = c.v.get();
  a.cap = c.cap;
  a.kv_f32 = c.f32;
  a.table = table.as<int32_t>();
  a.first = first.as<int32_t>();
  a.count = count.as<int32_t>();
  a.n = n;
  a.n_head = c.n_head;
  a.n_head_kv = c.n_kv;
  a.head_dim = c.hd;
  a.head_dim_v = c.hd;
  a.scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
  a.splits = splits;
  a.part = scratch.part.as<float>();
  a.out = out.as<float>();
  return a;
}

// Every head size and group it takes, f16 and f32 caches, one split and several; tokens whose
// ranges are one slot, a few (one part), more than a block's warps hold in one pass of their
// table entries (32 a warp), empty, and the whole shuffled table. The counters end at zero.
TEST(CudaDecodeAttention, MatchesReference) {
  CHANNEL_REQUIRE_CUDA();
  for (bool f32 : {false, true})
    for (int hd : {32, 64, 96, 128, 160, 192, 224, 256})
      for (int group : {1, 2, 3, 8}) {
        const int n_kv = 2, n_head = n_kv * group;
        const int64_t cap = hd == 64 ? 9000 : 301;  // 9,000: past 33 splits x 4 warps x 32
        FilledCache c(n_head, n_kv, hd, cap, f32, static_cast<uint32_t>(31 + hd + group));
        std::vector<int32_t> table(static_cast<size_t>(cap));
        std::iota(table.begin(), table.end(), 0);
        std::shuffle(table.begin(), table.end(), std::mt19937(5));
        const int c1 = static_cast<int>(cap);
        const std::vector<int32_t> first = {0, 10, 100, c1 - 1, 0};
        const std::vector<int32_t> count = {1, 57, c1 - 100, 0, c1};
        const int n = static_cast<int>(first.size());
        const std::vector<float> q = randn(static_cast<size_t>(n * n_head * hd), 41, 0.5f);
        std::vector<float> want(static_cast<size_t>(n * n_head * hd)),
            scores(static_cast<size_t>(cap));
        for (int t = 0; t < n; ++t)
          for (int h = 0; h < n_head; ++h) {
            const int hk = h / group;
            const AttentionHead head{c.hk.data() + hk * cap * hd, c.hv.data() + hk * cap * hd, hd,
                                     hd};
            const std::span<const int32_t> visible(
                table.data() + first[static_cast<size_t>(t)],
                static_cast<size_t>(count[static_cast<size_t>(t)]));
            attend_ref(q.data() + (t * n_head + h) * hd, head, visible,
                       1.0f / std::sqrt(static_cast<float>(hd)), scores.data(),
                       want.data() + (t * n_head + h) * hd);
          }
        cuda::DeviceBuffer dq = to_device(q), dt = to_device(table), df = to_device(first),
                           dc = to_device(count);
        for (int splits : {1, 7, 33}) {
          cuda::DeviceBuffer out(want.size() * 4, "out");
          Scratch scratch(n, n_head, n_kv, hd, splits);
          cuda::DecodeAttnArgs d;
          d.a = args_for(c, n, dq.as<float>(), static_cast<int64_t>(n_head) * hd, dt, df, dc, out,
                         splits, scratch);
          d.arrivals = scratch.arrivals.as<unsigned>();
          ASSERT_TRUE(cuda::decode_attention_supported(d.a));
          cuda::decode_attention(d, nullptr);
          const std::vector<float> got = from_device<float>(out, want.size());
          const std::string what = "hd " + std::to_string(hd) + " group " + std::to_string(group) +
                                   " f32 " + std::to_string(f32) + " splits " +
                                   std::to_string(splits);
          EXPECT_LE(nmse(got, want), 1e-10) << what;
          for (int i = 0; i < n_head * hd; ++i)  // the empty range gives zeros
            EXPECT_EQ(got[static_cast<size_t>(3 * n_head * hd + i)], 0.0f) << what;
          EXPECT_EQ(scratch.counters(n, n_kv),
                    std::vector<uint32_t>(static_cast<size_t>(n * n_kv), 0u))
              << what;

          // As W_o's input: per token the bytes of convert_act over the float output.
          const int64_t row = static_cast<int64_t>(n_head) * hd;
          for (GgmlType wo : {GgmlType::Q8_0, GgmlType::F16, GgmlType::BF16, GgmlType::F32}) {
            cuda::DeviceBuffer got_act(test::act_out_bytes(n, row), "act");
            d.a.out_act = got_act.get();
            d.a.out_form = cuda::act_form(wo);
            cuda::decode_attention(d, nullptr);
            test::expect_act_rows(wo, got_act, out.as<float>(), n, row, what);
          }
        }
      }
}

// The one-token form (finish): from the raw q | k | v row, with q/k norms and each rotation
// mode (read from the step's rope_table), the same cache and the same output bits as
// qkv_finish (computing its rotation) then the plain form; the new slot anywhere in the range
// (first, middle, last).
TEST(CudaDecodeAttention, FinishingItsOwnHeadsGivesQkvFinishBits) {
  CHANNEL_REQUIRE_CUDA();
  struct Case {
    int hd, group;
    cuda::RopeMode mode;
    int n_rot;
    bool norms, f32;
  };
  const Case cases[] = {{256, 2, cuda::RopeMode::neox, 256, true, false},
                        {128, 4, cuda::RopeMode::normal, 128, false, false},
                        {64, 3, cuda::RopeMode::neox, 32, true, true},
                        {32, 8, cuda::RopeMode::normal, 16, true, false}};
  for (const Case& k : cases) {
    const int n_kv = 2, n_head = n_kv * k.group, hd = k.hd;
    const int64_t cap = 300;
    for (int where : {0, 150, 269}) {
      // Two identical caches: one for each path.
      FilledCache a(n_head, n_kv, hd, cap, k.f32, 77), b(n_head, n_kv, hd, cap, k.f32, 77);
      std::vector<int32_t> table(static_cast<size_t>(cap));
      std::iota(table.begin(), table.end(), 0);
      std::shuffle(table.begin(), table.end(), std::mt19937(9));
      const std::vector<int32_t> first = {10}, count = {270};
      const std::vector<int32_t> slot = {table[static_cast<size_t>(10 + where)]};
      const std::vector<int32_t> pos = {1234};
      const std::vector<float> raw = randn(static_cast<size_t>(a.ld), 91, 1.3f);
      const std::vector<float> qn = randn(static_cast<size_t>(hd), 92),
                               kn = randn(static_cast<size_t>(hd), 93);
      cuda::DeviceBuffer dt = to_device(table), df = to_device(first), dc = to_device(count);
      cuda::DeviceBuffer ds = to_device(slot), dp = to_device(pos), dqn = to_device(qn),
                         dkn = to_device(kn);
      cuda::DeviceBuffer row_a = to_device(raw), row_b = to_device(raw);
      const cuda::RopeDev rope = cuda::make_rope(k.mode, k.n_rot, 1e4f, 1.0f, nullptr);
      const float* qnp = k.norms ? dqn.as<float>() : nullptr;
      const float* knp = k.norms ? dkn.as<float>() : nullptr;

      cuda::DeviceBuffer out_a(static_cast<size_t>(n_head * hd) * 4, "out"),
          out_b(out_a.bytes(), "out");
      // The fused path rotates from the step's table (rope_table), qkv_finish computes.
      cuda::DeviceBuffer table_cs(static_cast<size_t>(k.n_rot / 2) * 8, "rope table");
      cuda::rope_table(rope, dp.as<int32_t>(), 1, table_cs.as<float2>(), nullptr);
      cuda::RopeDev tabled = rope;
      tabled.table = table_cs.as<float2>();
      Scratch sa(1, n_head, n_kv, hd, 9), sb(1, n_head, n_kv, hd, 9);  // 270 slots: 9 parts
      cuda::DecodeAttnArgs fused{args_for(a, 1, row_a.as<float>(), a.ld, dt, df, dc, out_a, 9, sa),
                                 true,
                                 qnp,
                                 knp,
                                 1e-6f,
                                 tabled,
                                 dp.as<int32_t>(),
                                 ds.as<int32_t>(),
                                 sa.arrivals.as<unsigned>()};
      cuda::decode_attention(fused, nullptr);

      const cuda::QkvLayout l{n_head, n_kv, hd, hd, b.ld, k.f32};
      cuda::qkv_finish(l, row_b.as<float>(), 1, qnp, knp, 1e-6f, rope, dp.as<int32_t>(),
                       ds.as<int32_t>(), b.k.get(), b.v.get(), cap, nullptr);
      cuda::DecodeAttnArgs plain;
      plain.a = args_for(b, 1, row_b.as<float>(), b.ld, dt, df, dc, out_b, 9, sb);
      plain.arrivals = sb.arrivals.as<unsigned>();
      cuda::decode_attention(plain, nullptr);

      const std::string what = "hd " + std::to_string(hd) + " group " + std::to_string(k.group) +
                               " new slot at " + std::to_string(where);
      const size_t outs = static_cast<size_t>(n_head * hd);
      EXPECT_EQ(from_device<float>(out_a, outs), from_device<float>(out_b, outs)) << what;
      const size_t bytes = a.k.bytes();
      EXPECT_EQ(from_device<uint8_t>(a.k, bytes), from_device<uint8_t>(b.k, bytes))
          << what << " (keys)";
      EXPECT_EQ(from_device<uint8_t>(a.v, bytes), from_device<uint8_t>(b.v, bytes))
          << what << " (values)";
    }
  }
}

}  // namespace
}  // namespace channel

#endif
