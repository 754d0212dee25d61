// Reading the `bounded.*` header keys and sink tensors: a good file, and one clear error for
// each kind of bad header or sink tensor.
#include <cmath>
#include <cstring>
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "bounded/bounded_hparams.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "util/error.h"

namespace channel {
namespace {

constexpr int kLayers = 3, kHeads = 4, kKv = 2, kHd = 8, kW = 5, kS = 2, kRd = 4;

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(float));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<float> ramp(size_t n, float start) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + 0.25f * static_cast<float>(i);
  return v;
}

// A header + sinks for layer types {bounded, global, bounded}; `edit` may change anything.
struct Fixture {
  GgufWriter w;
  std::vector<uint8_t> bytes;

  explicit Fixture(const std::function<void(GgufWriter&)>& edit = {},
                   bool write_default_sinks = true) {
    w.set_string("general.architecture", "bounded");
    w.set_u32("bounded.attention.window", kW);
    w.set_u32("bounded.attention.sink_count", kS);
    w.set_u32("bounded.rope.dimension_count", kRd);
    w.set_f32("bounded.rope.freq_base", 10000.0f);
    w.set_i32_array("bounded.attention.layer_types", {0, 1, 0});
    if (write_default_sinks) {
      for (int layer : {0, 2}) add_sinks(w, layer, {kHd, kS, kKv}, GgmlType::F32);
    }
    if (edit) edit(w);
  }
  static void add_sinks(GgufWriter& w, int layer, std::vector<int64_t> ne, GgmlType type) {
    size_t n = 1;
    for (int64_t d : ne) n *= static_cast<size_t>(d);
    std::vector<uint8_t> data =
        type == GgmlType::F32 ? f32_bytes(ramp(n, layer)) : std::vector<uint8_t>(n * 2, 0);
    w.add_tensor(bounded_sink_k_name(layer), type, ne, data);
    w.add_tensor(bounded_sink_v_name(layer), GgmlType::F32, ne, f32_bytes(ramp(n, -1.0f)));
  }
  GgufFile open() {
    bytes = w.to_bytes();
    return GgufFile::from_memory(bytes.data(), bytes.size(), "m.gguf");
  }
};

BoundedHparams read(GgufFile& f, int head_dim_v = kHd) {
  return read_bounded_hparams(f, kLayers, kHeads, kKv, kHd, head_dim_v);
}

void expect_error(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error, expected one naming " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("m.gguf"), std::string::npos) << e.what();
  }
}

TEST(BoundedHparams, ReadsAGoodHeaderAndSinks) {
  Fixture fx;
  GgufFile f = fx.open();
  const BoundedHparams hp = read(f);
  EXPECT_EQ(hp.window, kW);
  EXPECT_EQ(hp.n_sinks, kS);
  EXPECT_EQ(hp.rope_dims, kRd);
  EXPECT_EQ(hp.rope_base, 10000.0);
  EXPECT_FALSE(hp.sink_key_norm);
  ASSERT_EQ(hp.layer_types.size(), 3u);
  EXPECT_TRUE(hp.is_bounded(0));
  EXPECT_FALSE(hp.is_bounded(1));
  EXPECT_TRUE(hp.is_bounded(2));

  std::vector<float> k_norm(kHd, 2.0f);
  const BoundedSinks s0 = load_bounded_sinks(f, hp, 0, kKv, kHd, k_norm.data(), 1e-6f);
  EXPECT_EQ(s0.k, ramp(kKv * kS * kHd, 0.0f));  // used exactly as stored
  EXPECT_EQ(s0.v, ramp(kKv * kS * kHd, -1.0f));
  const BoundedSinks s1 = load_bounded_sinks(f, hp, 1, kKv, kHd, k_norm.data(), 1e-6f);
  EXPECT_TRUE(s1.k.empty() && s1.v.empty());

  BoundedRopeCache cache;
  auto rope = cache.get(hp.window, hp.rope_dims, hp.rope_base);
  const BoundedAttnCfg c = bounded_layer_cfg(hp, kHeads, kKv, kHd, 1e-6f, rope.get());
  EXPECT_EQ(c.window, kW);
  EXPECT_EQ(c.attn_scale, 1.0f / std::sqrt(8.0f));
}

TEST(BoundedHparams, SinkKeyNormFlagNormalisesKeysOnce) {
  Fixture fx([](GgufWriter& w) { w.set_bool("bounded.attention.sink_key_norm", true); });
  GgufFile f = fx.open();
  const BoundedHparams hp = read(f);
  ASSERT_TRUE(hp.sink_key_norm);
  std::vector<float> k_norm(kHd, 2.0f);
  const BoundedSinks s = load_bounded_sinks(f, hp, 2, kKv, kHd, k_norm.data(), 0.0f);
  const std::vector<float> raw = ramp(kKv * kS * kHd, 2.0f);
  for (int r = 0; r < kKv * kS; ++r) {
    double ss = 0;
    for (int i = 0; i < kHd; ++i) ss += raw[r * kHd + i] * raw[r * kHd + i];
    const double scale = 1.0 / std::sqrt(ss / kHd);
    for (int i = 0; i < kHd; ++i) {
      EXPECT_NEAR(s.k[r * kHd + i], raw[r * kHd + i] * scale * 2.0, 1e-5);
    }
  }
  EXPECT_EQ(s.v, ramp(kKv * kS * kHd, -1.0f));  // values as stored
}

TEST(BoundedHparams, BadHeadersAreClearErrors) {
  auto with = [](const std::function<void(GgufWriter&)>& edit, const std::string& needle,
                 int head_dim_v = kHd) {
    Fixture fx(edit);
    GgufFile f = fx.open();
    expect_error([&] { read(f, head_dim_v); }, needle);
  };
  with([](GgufWriter& w) { w.set_u32("bounded.attention.window", 0); },
       "bounded.attention.window = 0");
  with([](GgufWriter& w) { w.set_u32("bounded.attention.window", (1u << 20) + 1); },
       "bounded.attention.window");
  with([](GgufWriter& w) { w.set_u32("bounded.attention.sink_count", 257); },
       "bounded.attention.sink_count = 257");
  with([](GgufWriter& w) { w.set_u32("bounded.rope.dimension_count", 10); },
       "bounded.rope.dimension_count = 10");
  with([](GgufWriter& w) { w.set_u32("bounded.rope.dimension_count", 3); },
       "bounded.rope.dimension_count = 3");
  with(
      [](GgufWriter& w) {
        w.set_i32_array("bounded.attention.layer_types", {0, 1});
      },
      "layer_types has 2 entries");
  with(
      [](GgufWriter& w) {
        w.set_i32_array("bounded.attention.layer_types", {0, 2, 0});
      },
      "layer_types[1] = 2");
  with({}, "value_length", kHd * 2);
}

TEST(BoundedHparams, MissingKeysAreNamed) {
  GgufWriter w;
  w.set_string("general.architecture", "bounded");
  std::vector<uint8_t> bytes = w.to_bytes();
  GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size(), "m.gguf");
  expect_error([&] { read(f); }, "bounded.attention.window");
}

TEST(BoundedHparams, BadSinkTensorsAreClearErrors) {
  auto with_sinks = [](const std::function<void(GgufWriter&)>& add, int layer,
                       const std::string& needle) {
    Fixture fx(
        [&](GgufWriter& w) {
          Fixture::add_sinks(w, 0, {kHd, kS, kKv}, GgmlType::F32);
          add(w);
        },
        false);
    GgufFile f = fx.open();
    const BoundedHparams hp = read(f);
    std::vector<float> k_norm(kHd, 1.0f);
    expect_error([&] { load_bounded_sinks(f, hp, layer, kKv, kHd, k_norm.data(), 1e-6f); }, needle);
  };
  // Shapes that disagree with the header: S, head_dim, n_kv_heads, an extra dimension.
  with_sinks(
      [](GgufWriter& w) {
        Fixture::add_sinks(w, 2, {kHd, kS + 1, kKv}, GgmlType::F32);
      },
      2, "blk.2.attn_sink_k.weight' has shape [8, 3, 2, 1]");
  with_sinks(
      [](GgufWriter& w) {
        Fixture::add_sinks(w, 2, {kHd - 2, kS, kKv}, GgmlType::F32);
      },
      2, "expected [head_dim 8, sink_count 2, head_count_kv 2]");
  with_sinks(
      [](GgufWriter& w) {
        Fixture::add_sinks(w, 2, {kHd, kS, kKv * 2}, GgmlType::F32);
      },
      2, "blk.2.attn_sink_k.weight");
  with_sinks(
      [](GgufWriter& w) {
        Fixture::add_sinks(w, 2, {kHd, kS, kKv, 2}, GgmlType::F32);
      },
      2, "blk.2.attn_sink_k.weight");
  with_sinks(
      [](GgufWriter& w) {
        Fixture::add_sinks(w, 2, {kHd, kS, kKv}, GgmlType::F16);
      },
      2, "expected f32");
  with_sinks([](GgufWriter&) {}, 2, "lacks tensor 'blk.2.attn_sink_k.weight'");
  with_sinks(
      [](GgufWriter& w) {
        Fixture::add_sinks(w, 2, {kHd, kS, kKv}, GgmlType::F32);
        Fixture::add_sinks(w, 1, {kHd, kS, kKv}, GgmlType::F32);
      },
      1, "layer 1 is global");
}

}  // namespace
}  // namespace channel
