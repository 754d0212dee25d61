// GgufWriter -> GgufFile round trips of every value type, array type and tensor type, and
// the typed getters' conversions and refusals.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <limits>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "util/error.h"

namespace channel {
namespace {

// Runs f and returns the channel::Error message it throws ("" when it does not throw).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::vector<uint8_t> iota_bytes(size_t n, uint8_t start = 0) {
  std::vector<uint8_t> v(n);  // [n]
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(start + i * 7);
  return v;
}

GgufWriter make_everything(uint32_t alignment) {
  GgufWriter w(alignment);
  w.set_u8("t.u8", 200);
  w.set_i8("t.i8", -100);
  w.set_u16("t.u16", 60000);
  w.set_i16("t.i16", -30000);
  w.set_u32("t.u32", 4000000000u);
  w.set_i32("t.i32", -2000000000);
  w.set_u64("t.u64", std::numeric_limits<uint64_t>::max());
  w.set_i64("t.i64", std::numeric_limits<int64_t>::min());
  w.set_f32("t.f32", 1.5f);
  w.set_f64("t.f64", -2.25);
  w.set_bool("t.bool", true);
  w.set_string("t.string", "héllo\n");
  w.set_string("t.empty_string", "");
  w.set_u8_array("a.u8", {1, 2, 255});
  w.set_i8_array("a.i8", {-1, 0, 127});
  w.set_u16_array("a.u16", {65535, 1});
  w.set_i16_array("a.i16", {-32768, 5});
  w.set_u32_array("a.u32", {7, 8, 9});
  w.set_i32_array("a.i32", {-7, 8});
  w.set_u64_array("a.u64", {1ull << 40});
  w.set_i64_array("a.i64", {-(1ll << 40), 3});
  w.set_f32_array("a.f32", {0.5f, -1.0f, 3.25f});
  w.set_f64_array("a.f64", {1e300});
  w.set_bool_array("a.bool", {true, false, true});
  w.set_string_array("a.string", {"a", "", "ccc"});
  w.set_f32_array("a.empty", {});
  w.add_tensor("f32", GgmlType::F32, {3, 2}, iota_bytes(24));
  w.add_tensor("f16", GgmlType::F16, {5}, iota_bytes(10, 1));
  w.add_tensor("bf16", GgmlType::BF16, {1, 1, 1, 3}, iota_bytes(6, 2));
  w.add_tensor("q8_0", GgmlType::Q8_0, {64, 3}, iota_bytes(6 * 34, 3));
  w.add_tensor("q4_0", GgmlType::Q4_0, {32, 1, 2}, iota_bytes(2 * 18, 4));
  w.add_tensor("iq4_xs", static_cast<GgmlType>(23), {256}, iota_bytes(136, 5));
  w.add_tensor("empty", GgmlType::F32, {0, 4}, {});
  return w;
}

void check_everything(const GgufFile& f) {
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_uint("t.u8"), 200u);
  EXPECT_EQ(f.get_int("t.i8"), -100);
  EXPECT_EQ(f.get_uint("t.u16"), 60000u);
  EXPECT_EQ(f.get_int("t.i16"), -30000);
  EXPECT_EQ(f.get_uint("t.u32"), 4000000000u);
  EXPECT_EQ(f.get_int("t.i32"), -2000000000);
  EXPECT_EQ(f.get_uint("t.u64"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f.get_int("t.i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f.get_float("t.f32"), 1.5);
  EXPECT_EQ(f.get_float("t.f64"), -2.25);
  EXPECT_EQ(f.get_float("t.i16"), -30000.0);
  EXPECT_TRUE(f.get_bool("t.bool"));
  EXPECT_EQ(f.get_string("t.string"), "héllo\n");
  EXPECT_EQ(f.get_string("t.empty_string"), "");
  EXPECT_EQ(f.get_int_array("a.u8"), (std::vector<int64_t>{1, 2, 255}));
  EXPECT_EQ(f.get_int_array("a.i8"), (std::vector<int64_t>{-1, 0, 127}));
  EXPECT_EQ(f.get_int_array("a.u16"), (std::vector<int64_t>{65535, 1}));
  EXPECT_EQ(f.get_int_array("a.i16"), (std::vector<int64_t>{-32768, 5}));
  EXPECT_EQ(f.get_int_array("a.u32"), (std::vector<int64_t>{7, 8, 9}));
  EXPECT_EQ(f.get_int_array("a.i32"), (std::vector<int64_t>{-7, 8}));
  EXPECT_EQ(f.get_int_array("a.u64"), (std::vector<int64_t>{1ll << 40}));
  EXPECT_EQ(f.get_int_array("a.i64"), (std::vector<int64_t>{-(1ll << 40), 3}));
  EXPECT_EQ(f.get_f32_array("a.f32"), (std::vector<float>{0.5f, -1.0f, 3.25f}));
  EXPECT_TRUE(f.get_f32_array("a.empty").empty());
  auto strings = f.get_string_array("a.string");
  ASSERT_EQ(strings.size(), 3u);
  EXPECT_EQ(strings[0], "a");
  EXPECT_EQ(strings[1], "");
  EXPECT_EQ(strings[2], "ccc");

  // Raw access for the array types without a dedicated getter.
  const GgufKv* f64 = f.find("a.f64");
  ASSERT_NE(f64, nullptr);
  EXPECT_EQ(f64->type, GgufValueType::ARRAY);
  EXPECT_EQ(f64->array_type, GgufValueType::F64);
  ASSERT_EQ(f64->array_len, 1u);
  double d;
  std::memcpy(&d, f64->value, 8);
  EXPECT_EQ(d, 1e300);
  const GgufKv* bools = f.find("a.bool");
  ASSERT_NE(bools, nullptr);
  EXPECT_EQ(bools->array_type, GgufValueType::BOOL);
  EXPECT_EQ(std::vector<uint8_t>(bools->value, bools->value + 3), (std::vector<uint8_t>{1, 0, 1}));

  ASSERT_EQ(f.tensors().size(), 7u);
  struct Expect {
    const char* name;
    uint32_t type;
    int n_dims;
    std::vector<int64_t> ne;
    std::vector<uint8_t> data;
  };
  const Expect expects[] = {
      {"f32", 0, 2, {3, 2, 1, 1}, iota_bytes(24)},
      {"f16", 1, 1, {5, 1, 1, 1}, iota_bytes(10, 1)},
      {"bf16", 30, 4, {1, 1, 1, 3}, iota_bytes(6, 2)},
      {"q8_0", 8, 2, {64, 3, 1, 1}, iota_bytes(6 * 34, 3)},
      {"q4_0", 2, 3, {32, 1, 2, 1}, iota_bytes(36, 4)},
      {"iq4_xs", 23, 1, {256, 1, 1, 1}, iota_bytes(136, 5)},
      {"empty", 0, 2, {0, 4, 1, 1}, {}},
  };
  uint64_t expected_offset = 0;  // the writer packs tensors in order, each aligned
  for (const Expect& e : expects) {
    SCOPED_TRACE(e.name);
    const TensorInfo* t = f.find_tensor(e.name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->type_id, e.type);
    EXPECT_EQ(t->n_dims, e.n_dims);
    EXPECT_EQ(std::vector<int64_t>(t->ne, t->ne + 4), e.ne);
    ASSERT_EQ(t->n_bytes, e.data.size());
    if (!e.data.empty()) {
      EXPECT_EQ(std::memcmp(t->data, e.data.data(), e.data.size()), 0);
    }
    EXPECT_EQ(t->offset, expected_offset);
    EXPECT_EQ(t->offset % f.alignment(), 0u);
    expected_offset += (t->n_bytes + f.alignment() - 1) / f.alignment() * f.alignment();
  }
  EXPECT_EQ(f.data_offset() % f.alignment(), 0u);
  EXPECT_EQ(f.file_size(), f.data_offset() + expected_offset);
  EXPECT_EQ(f.find_tensor("nope"), nullptr);
  EXPECT_EQ(f.find("nope"), nullptr);

  EXPECT_EQ(f.tensor_traits(*f.find_tensor("q8_0")).block_bytes, 34);
  std::string err = error_of([&] { f.tensor_traits(*f.find_tensor("iq4_xs")); });
  EXPECT_NE(err.find("tensor 'iq4_xs'"), std::string::npos) << err;
  EXPECT_NE(err.find("type iq4_xs is not supported"), std::string::npos) << err;
}

TEST(GgufRoundTrip, EveryValueAndTensorTypeFromMemory) {
  auto bytes = make_everything(32).to_bytes();
  auto f = GgufFile::from_memory(bytes.data(), bytes.size(), "mem.gguf");
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.find("general.alignment"), nullptr);  // the default is not written
  check_everything(f);
}

TEST(GgufRoundTrip, NonDefaultAlignmentIsRecordedAndHonoured) {
  auto bytes = make_everything(256).to_bytes();
  auto f = GgufFile::from_memory(bytes.data(), bytes.size(), "mem.gguf");
  EXPECT_EQ(f.alignment(), 256u);
  EXPECT_EQ(f.get_uint("general.alignment"), 256u);
  check_everything(f);
}

TEST(GgufRoundTrip, WriteFileThenMmap) {
  auto dir = std::filesystem::temp_directory_path() / ("gguf_rt_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "x.gguf").string();
  make_everything(64).write_file(path);
  make_everything(64).write_file(path);  // replaces atomically
  {
    auto f = GgufFile::open(path);
    EXPECT_EQ(f.name(), path);
    check_everything(f);
    // The mapping is page-aligned, so file alignment is memory alignment.
    for (const TensorInfo& t : f.tensors()) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 64, 0u) << t.name;
    }
  }
  size_t n_files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir)) n_files += e.is_regular_file();
  EXPECT_EQ(n_files, 1u);  // no temporary left behind
  std::filesystem::remove_all(dir);
}

TEST(GgufRoundTrip, ReplacingAKeyKeepsOneRecord) {
  GgufWriter w;
  w.set_u32("k", 1);
  w.set_string("other", "x");
  w.set_string("k", "now a string");
  auto bytes = w.to_bytes();
  auto f = GgufFile::from_memory(bytes.data(), bytes.size(), "mem");
  ASSERT_EQ(f.kvs().size(), 2u);
  EXPECT_EQ(f.kvs()[0].key, "k");
  EXPECT_EQ(f.get_string("k"), "now a string");
}

TEST(GgufRoundTrip, GettersRefuseWrongTypesAndMissingKeys) {
  auto bytes = make_everything(32).to_bytes();
  auto f = GgufFile::from_memory(bytes.data(), bytes.size(), "mem.gguf");
  std::string e = error_of([&] { f.get_uint("missing.key"); });
  EXPECT_EQ(e, "gguf: mem.gguf: key 'missing.key' is missing");
  e = error_of([&] { f.get_string("t.u32"); });
  EXPECT_NE(e.find("key 't.u32': expected a string, found u32 (at offset "), std::string::npos)
      << e;
  e = error_of([&] { f.get_uint("t.i8"); });
  EXPECT_NE(e.find("found -100"), std::string::npos) << e;
  e = error_of([&] { f.get_int("t.u64"); });
  EXPECT_NE(e.find("does not fit in int64"), std::string::npos) << e;
  e = error_of([&] { f.get_bool("t.u8"); });
  EXPECT_NE(e.find("expected a bool"), std::string::npos) << e;
  e = error_of([&] { f.get_float("t.string"); });
  EXPECT_NE(e.find("expected a number, found string"), std::string::npos) << e;
  e = error_of([&] { f.get_f32_array("a.f64"); });
  EXPECT_NE(e.find("expected an array of f32, found array of f64"), std::string::npos) << e;
  e = error_of([&] { f.get_int_array("a.f32"); });
  EXPECT_NE(e.find("expected an array of integers"), std::string::npos) << e;
  e = error_of([&] { f.get_string_array("t.string"); });
  EXPECT_NE(e.find("expected an array of string, found string"), std::string::npos) << e;
  e = error_of([&] { f.get_uint_or("t.string", 3); });
  EXPECT_NE(e.find("expected an unsigned integer"), std::string::npos) << e;

  EXPECT_EQ(f.get_uint_or("missing", 7), 7u);
  EXPECT_EQ(f.get_int_or("missing", -7), -7);
  EXPECT_EQ(f.get_float_or("missing", 0.25), 0.25);
  EXPECT_EQ(f.get_bool_or("missing", true), true);
  EXPECT_EQ(f.get_string_or("missing", "fb"), "fb");
  EXPECT_EQ(f.get_uint_or("t.u8", 7), 200u);
}

TEST(GgmlTypeLayout, KnowsEveryDefinedTypeAndRefusesRemovedOnes) {
  EXPECT_EQ(ggml_type_layout(14)->block_bytes, 210);  // q6_K
  EXPECT_EQ(ggml_type_layout(14)->block_elems, 256);
  EXPECT_EQ(ggml_type_layout(12)->block_bytes, 144);  // q4_K
  EXPECT_EQ(ggml_type_layout(28)->block_bytes, 8);    // f64
  EXPECT_EQ(ggml_type_layout(39)->name, "mxfp4");
  for (uint32_t removed : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 43u, 1000u}) {
    EXPECT_FALSE(ggml_type_layout(removed).has_value()) << removed;
  }
  for (uint32_t id : {0u, 1u, 2u, 8u, 30u}) {  // supported types agree with their layout
    EXPECT_EQ(ggml_type_layout(id)->block_bytes, ggml_type_traits(id)->block_bytes);
    EXPECT_EQ(ggml_type_layout(id)->name, ggml_type_traits(id)->name);
  }
}

TEST(GgufWriterTest, RefusesBadInput) {
  EXPECT_NE(error_of([] { GgufWriter w(24); }).find("not a power of two"), std::string::npos);
  GgufWriter w;
  w.add_tensor("a", GgmlType::F32, {2}, iota_bytes(8));
  EXPECT_NE(error_of([&] {
              w.add_tensor("a", GgmlType::F32, {2}, iota_bytes(8));
            }).find("duplicate tensor 'a'"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              w.add_tensor("b", GgmlType::F32, {3}, iota_bytes(8));
            }).find("8 bytes of data, expected 12"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              w.add_tensor("c", GgmlType::Q8_0, {33}, iota_bytes(34));
            }).find("not a multiple of the q8_0 block size 32"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              w.add_tensor("d", GgmlType::F32, {1, 1, 1, 1, 1}, iota_bytes(4));
            }).find("5 dimensions"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              w.add_tensor("", GgmlType::F32, {1}, iota_bytes(4));
            }).find("must be 1..63 bytes"),
            std::string::npos);
  EXPECT_NE(error_of([&] { w.set_u32("general.alignment", 64); }).find("general.alignment"),
            std::string::npos);
  EXPECT_NE(error_of([&] { w.set_u32("", 1); }).find("empty key"), std::string::npos);
  EXPECT_NE(error_of([&] { w.write_file("/nonexistent-dir/x.gguf"); }).find("cannot create"),
            std::string::npos);
}

}  // namespace
}  // namespace channel
