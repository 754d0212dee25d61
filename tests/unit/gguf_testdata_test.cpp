// Reading every GGUF of the shared reference data: tensor counts and types and a few keys,
// checked against numbers copied from testdata/MANIFEST.json.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "testdata.h"

namespace channel {
namespace {

using TypeCounts = std::map<std::string, int>;

TypeCounts type_counts(const GgufFile& f) {
  TypeCounts c;
  for (const TensorInfo& t : f.tensors()) c[ggml_type_name(t.type_id)]++;
  return c;
}

struct ModelCase {
  const char* file;
  const char* arch;
  size_t bytes;
  size_t n_tensors;
  TypeCounts types;
  uint64_t file_type;
};

TEST(GgufTestdata, MicroModels) {
  CHANNEL_REQUIRE_TESTDATA();
  const ModelCase cases[] = {
      {"models/gemma3-micro-f16.gguf", "gemma3", 4105824, 80, {{"f16", 43}, {"f32", 37}}, 1},
      {"models/gemma3-micro-f32.gguf", "gemma3", 8103520, 80, {{"f32", 80}}, 0},
      {"models/gemma3-micro-q4_0.gguf",
       "gemma3",
       1494624,
       80,
       {{"f32", 37}, {"q8_0", 1}, {"q4_0", 42}},
       2},
      {"models/gemma3-micro-q8_0.gguf", "gemma3", 2231904, 80, {{"q8_0", 43}, {"f32", 37}}, 7},
      {"models/llama-micro-f32.gguf", "llama", 8094304, 56, {{"f32", 56}}, 0},
      {"models/llama-micro-q4_0.gguf",
       "llama",
       1485408,
       56,
       {{"f32", 13}, {"q8_0", 1}, {"q4_0", 42}},
       2},
      {"models/llama-micro-q8_0.gguf", "llama", 2222688, 56, {{"q8_0", 43}, {"f32", 13}}, 7},
  };
  for (const ModelCase& c : cases) {
    SCOPED_TRACE(c.file);
    auto f = GgufFile::open(test::testdata_path(c.file));
    std::string arch = c.arch;
    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.file_size(), c.bytes);
    EXPECT_EQ(f.tensors().size(), c.n_tensors);
    EXPECT_EQ(type_counts(f), c.types);
    EXPECT_EQ(f.get_string("general.architecture"), arch);
    EXPECT_EQ(f.get_uint(arch + ".block_count"), 6u);
    EXPECT_EQ(f.get_uint(arch + ".embedding_length"), 128u);
    EXPECT_EQ(f.get_uint(arch + ".attention.head_count"), 4u);
    EXPECT_EQ(f.get_uint(arch + ".attention.head_count_kv"), 2u);
    EXPECT_EQ(f.get_uint("general.file_type"), c.file_type);
    EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
    EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens").size(), 4096u);
    EXPECT_EQ(f.get_f32_array("tokenizer.ggml.scores").size(), 4096u);
    EXPECT_EQ(f.get_uint("tokenizer.ggml.bos_token_id"), 2u);
    EXPECT_TRUE(f.get_bool("tokenizer.ggml.add_bos_token"));
    const TensorInfo* embd = f.find_tensor("token_embd.weight");
    ASSERT_NE(embd, nullptr);
    EXPECT_EQ(embd->ne[0], 128);
    EXPECT_EQ(embd->ne[1], 4096);
    for (const TensorInfo& t : f.tensors()) {
      EXPECT_EQ(f.tensor_traits(t).name, ggml_type_name(t.type_id));  // all computable
    }
    if (arch == "gemma3") {
      EXPECT_EQ(f.get_uint("gemma3.attention.sliding_window"), 32u);
      EXPECT_EQ(f.get_float("gemma3.rope.freq_base_swa"), 10000.0);
      EXPECT_EQ(f.find_tensor("output.weight"), nullptr);  // tied to token_embd
    }
  }
}

TEST(GgufTestdata, Stories260K) {
  CHANNEL_REQUIRE_TESTDATA();
  auto f = GgufFile::open(test::testdata_path("stories260K/stories260K.gguf"));
  EXPECT_EQ(f.file_size(), 1185376u);
  EXPECT_EQ(f.tensors().size(), 48u);
  EXPECT_EQ(type_counts(f), (TypeCounts{{"f32", 48}}));
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_uint("llama.embedding_length"), 64u);
  EXPECT_EQ(f.get_uint("llama.block_count"), 5u);
  EXPECT_EQ(f.get_uint("llama.attention.head_count"), 8u);
  EXPECT_EQ(f.get_uint("llama.attention.head_count_kv"), 4u);
  EXPECT_EQ(f.get_uint("llama.feed_forward_length"), 172u);
  EXPECT_FLOAT_EQ(f.get_float("llama.attention.layer_norm_rms_epsilon"), 1e-5);
  EXPECT_EQ(f.find("llama.rope.freq_base"), nullptr);
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens").size(), 512u);
  EXPECT_EQ(f.get_uint("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(f.get_uint("tokenizer.ggml.eos_token_id"), 2u);
  ASSERT_NE(f.find_tensor("output.weight"), nullptr);  // separate output
  const TensorInfo* embd = f.find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->ne[0], 64);
  EXPECT_EQ(embd->ne[1], 512);
  const float* w = reinterpret_cast<const float*>(embd->data);
  for (int i = 0; i < 64 * 512; ++i) ASSERT_TRUE(std::isfinite(w[i]));  // real trained weights
}

TEST(GgufTestdata, VocabOnlyFiles) {
  CHANNEL_REQUIRE_TESTDATA();
  auto g = GgufFile::open(test::testdata_path("tokenizer/gemma3-vocab.gguf"));
  EXPECT_EQ(g.tensors().size(), 0u);
  EXPECT_EQ(g.get_string("general.architecture"), "gemma3");
  EXPECT_EQ(g.get_string("tokenizer.ggml.model"), "llama");
  auto tokens = g.get_string_array("tokenizer.ggml.tokens");
  EXPECT_EQ(tokens.size(), 262144u);
  EXPECT_EQ(tokens[2], "<bos>");
  EXPECT_EQ(g.get_f32_array("tokenizer.ggml.scores").size(), 262144u);
  EXPECT_EQ(g.get_int_array("tokenizer.ggml.token_type").size(), 262144u);
  EXPECT_EQ(g.get_uint("tokenizer.ggml.eot_token_id"), 106u);
  EXPECT_FALSE(g.get_bool("tokenizer.ggml.add_space_prefix"));

  auto l = GgufFile::open(test::testdata_path("tokenizer/llama3-vocab.gguf"));
  EXPECT_EQ(l.tensors().size(), 0u);
  EXPECT_EQ(l.get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(l.get_string("tokenizer.ggml.pre"), "llama-bpe");
  auto ltokens = l.get_string_array("tokenizer.ggml.tokens");
  EXPECT_EQ(ltokens.size(), 128256u);
  EXPECT_EQ(ltokens[128000], "<|begin_of_text|>");
  EXPECT_EQ(l.get_string_array("tokenizer.ggml.merges").size(), 280147u);
  EXPECT_EQ(l.get_uint("tokenizer.ggml.bos_token_id"), 128000u);
  EXPECT_EQ(l.get_uint("tokenizer.ggml.eos_token_id"), 128001u);
}

template <typename T>
std::vector<T> raw_array(const GgufKv& kv) {
  std::vector<T> v(kv.array_len);  // [array_len]
  if (!v.empty()) std::memcpy(v.data(), kv.value, v.size() * sizeof(T));
  return v;
}

template <typename T>
T raw_scalar(const GgufKv& kv) {
  T v;
  std::memcpy(&v, kv.value, sizeof(T));
  return v;
}

// Copies every key and tensor of f into a writer, through the public API only.
GgufWriter copy_of(const GgufFile& f) {
  GgufWriter w(f.alignment());
  for (const GgufKv& kv : f.kvs()) {
    const std::string& k = kv.key;
    switch (kv.type) {
      case GgufValueType::U8:
        w.set_u8(k, raw_scalar<uint8_t>(kv));
        break;
      case GgufValueType::I8:
        w.set_i8(k, raw_scalar<int8_t>(kv));
        break;
      case GgufValueType::U16:
        w.set_u16(k, raw_scalar<uint16_t>(kv));
        break;
      case GgufValueType::I16:
        w.set_i16(k, raw_scalar<int16_t>(kv));
        break;
      case GgufValueType::U32:
        w.set_u32(k, raw_scalar<uint32_t>(kv));
        break;
      case GgufValueType::I32:
        w.set_i32(k, raw_scalar<int32_t>(kv));
        break;
      case GgufValueType::U64:
        w.set_u64(k, raw_scalar<uint64_t>(kv));
        break;
      case GgufValueType::I64:
        w.set_i64(k, raw_scalar<int64_t>(kv));
        break;
      case GgufValueType::F32:
        w.set_f32(k, raw_scalar<float>(kv));
        break;
      case GgufValueType::F64:
        w.set_f64(k, raw_scalar<double>(kv));
        break;
      case GgufValueType::BOOL:
        w.set_bool(k, f.get_bool(k));
        break;
      case GgufValueType::STRING:
        w.set_string(k, f.get_string(k));
        break;
      case GgufValueType::ARRAY:
        switch (kv.array_type) {
          case GgufValueType::STRING: {
            auto views = f.get_string_array(k);
            w.set_string_array(k, std::vector<std::string>(views.begin(), views.end()));
            break;
          }
          case GgufValueType::F32:
            w.set_f32_array(k, f.get_f32_array(k));
            break;
          case GgufValueType::I32:
            w.set_i32_array(k, raw_array<int32_t>(kv));
            break;
          case GgufValueType::U32:
            w.set_u32_array(k, raw_array<uint32_t>(kv));
            break;
          default:
            ADD_FAILURE() << "array type not used by the test data: " << k;
        }
        break;
    }
  }
  for (const TensorInfo& t : f.tensors()) {
    w.add_tensor(t.name, static_cast<GgmlType>(t.type_id),
                 std::vector<int64_t>(t.ne, t.ne + t.n_dims),
                 std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  }
  return w;
}

// gguf-py (which made the reference files) and GgufWriter agree on the layout, so reading a
// file and writing it back gives the same bytes.
TEST(GgufTestdata, RewriteIsByteIdentical) {
  CHANNEL_REQUIRE_TESTDATA();
  for (const char* file : {"models/llama-micro-q4_0.gguf", "models/gemma3-micro-q8_0.gguf",
                           "models/gemma3-micro-f16.gguf", "stories260K/stories260K.gguf",
                           "tokenizer/llama3-vocab.gguf"}) {
    SCOPED_TRACE(file);
    auto f = GgufFile::open(test::testdata_path(file));
    std::vector<uint8_t> bytes = copy_of(f).to_bytes();
    ASSERT_EQ(bytes.size(), f.file_size());
    auto g = GgufFile::from_memory(bytes.data(), bytes.size(), "copy");
    std::ifstream in(test::testdata_path(file), std::ios::binary);
    std::vector<uint8_t> orig((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());  // [file_size]
    ASSERT_EQ(orig.size(), bytes.size());
    EXPECT_TRUE(orig == bytes);
    EXPECT_EQ(g.kvs().size(), f.kvs().size());
    EXPECT_EQ(g.tensors().size(), f.tensors().size());
  }
}

}  // namespace
}  // namespace channel
