// Hand-made corrupt GGUF files: each must be refused with one channel::Error whose message
// names the file, the field and the offset of the problem, and never crash.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "util/error.h"

namespace channel {
namespace {

using Bytes = std::vector<uint8_t>;

// Little-endian byte builder for files the writer would refuse to make.
struct Raw {
  Bytes b;
  Raw& bytes(std::string_view s) {
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Raw& u8(uint8_t v) {
    b.push_back(v);
    return *this;
  }
  Raw& u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  Raw& u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  Raw& str(std::string_view s) { return u64(s.size()).bytes(s); }
  Raw& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return bytes("GGUF").u32(version).u64(n_tensors).u64(n_kv);
  }
  Raw& pad(size_t n = 64) {
    b.resize(b.size() + n, 0);
    return *this;
  }
};

void put_u32(Bytes& b, uint64_t at, uint32_t v) {
  std::memcpy(b.data() + at, &v, 4);
}
void put_u64(Bytes& b, uint64_t at, uint64_t v) {
  std::memcpy(b.data() + at, &v, 8);
}

// The error a buffer produces when read as "bad.gguf" ("" when it reads fine).
std::string error_of(const Bytes& b) {
  try {
    GgufFile::from_memory(b.data(), b.size(), "bad.gguf");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_REFUSED(bytes, ...)                                                             \
  do {                                                                                         \
    std::string msg_ = error_of(bytes);                                                        \
    ASSERT_FALSE(msg_.empty()) << "accepted";                                                  \
    EXPECT_EQ(msg_.rfind("gguf: bad.gguf: ", 0), 0u) << msg_;                                  \
    EXPECT_EQ(msg_.find('\n'), std::string::npos) << msg_;                                     \
    for (const std::string& part_ : std::vector<std::string>{__VA_ARGS__}) {                   \
      EXPECT_NE(msg_.find(part_), std::string::npos) << "want '" << part_ << "' in: " << msg_; \
    }                                                                                          \
  } while (0)

// A small valid file: two keys and two tensors. Records are located with the reader, so the
// tests below can patch exactly one field.
struct Sample {
  Bytes b;
  uint64_t w_record = 0;  // offset of tensor 'w' record (name length first)
  uint64_t v_record = 0;  // offset of tensor 'v' record

  Sample() {
    GgufWriter w;
    w.set_string("general.architecture", "llama");
    w.set_u32("llama.block_count", 2);
    w.add_tensor("w", GgmlType::F32, {4, 2}, Bytes(32, 1));
    w.add_tensor("v", GgmlType::Q8_0, {32}, Bytes(34, 2));
    b = w.to_bytes();
    auto f = GgufFile::from_memory(b.data(), b.size(), "ok");
    w_record = f.find_tensor("w")->record_offset;
    v_record = f.find_tensor("v")->record_offset;
  }
  // Field offsets inside a one-letter-named tensor record with n_dims dims.
  static uint64_t n_dims_at(uint64_t rec) { return rec + 8 + 1; }
  static uint64_t ne_at(uint64_t rec, int d) { return rec + 8 + 1 + 4 + 8 * d; }
  static uint64_t type_at(uint64_t rec, int n_dims) { return ne_at(rec, n_dims); }
  static uint64_t offset_at(uint64_t rec, int n_dims) { return type_at(rec, n_dims) + 4; }
};

TEST(GgufCorrupt, SampleIsValid) {
  Sample s;
  EXPECT_EQ(error_of(s.b), "");
  // Version 2 has the same layout and is read too.
  put_u32(s.b, 4, 2);
  EXPECT_EQ(error_of(s.b), "");
}

TEST(GgufCorrupt, EmptyFile) {
  EXPECT_REFUSED(Bytes{}, "header: truncated: the magic needs 4 bytes");
}

TEST(GgufCorrupt, TruncatedAtEveryByte) {
  Sample s;
  // Every prefix that cuts a record or tensor data (trailing padding is optional).
  auto f = GgufFile::from_memory(s.b.data(), s.b.size(), "ok");
  size_t end = 0;
  for (const TensorInfo& t : f.tensors()) {
    end = std::max<size_t>(end, f.data_offset() + t.offset + t.n_bytes);
  }
  for (size_t n = 0; n < end; ++n) {
    Bytes cut(s.b.begin(), s.b.begin() + n);
    std::string msg = error_of(cut);
    ASSERT_FALSE(msg.empty()) << "prefix of " << n << " bytes accepted";
    EXPECT_TRUE(msg.find("truncated") != std::string::npos ||
                msg.find("past the end of the file") != std::string::npos ||
                msg.find("cannot fit") != std::string::npos ||
                msg.find("bytes left in the file") != std::string::npos)
        << n << ": " << msg;
  }
}

TEST(GgufCorrupt, BadMagic) {
  Sample s;
  s.b[3] = 'G';
  EXPECT_REFUSED(s.b, "header: bad magic \"GGUG\"", "not a GGUF file", "(at offset 0)");
}

TEST(GgufCorrupt, GarbageIsNotGguf) {
  Bytes g(1000);
  std::mt19937 rng(7);
  for (auto& x : g) x = static_cast<uint8_t>(rng());
  EXPECT_REFUSED(g, "bad magic");
}

TEST(GgufCorrupt, UnsupportedVersions) {
  Sample s;
  put_u32(s.b, 4, 1);
  EXPECT_REFUSED(s.b, "unsupported GGUF version 1", "(at offset 4)");
  put_u32(s.b, 4, 4);
  EXPECT_REFUSED(s.b, "unsupported GGUF version 4");
  put_u32(s.b, 4, 0x03000000);  // a big-endian v3 file
  EXPECT_REFUSED(s.b, "unsupported GGUF version 50331648, probably a big-endian file");
}

TEST(GgufCorrupt, HugeKeyValueCount) {
  Sample s;
  put_u64(s.b, 16, uint64_t{1} << 60);
  EXPECT_REFUSED(s.b, "header: key/value count 1152921504606846976 cannot fit", "(at offset 16)");
}

TEST(GgufCorrupt, HugeTensorCount) {
  Sample s;
  put_u64(s.b, 8, ~uint64_t{0});
  EXPECT_REFUSED(s.b, "header: tensor count 18446744073709551615 cannot fit", "(at offset 8)");
}

TEST(GgufCorrupt, HugeKeyLength) {
  Sample s;
  put_u64(s.b, 24, ~uint64_t{0} - 3);
  EXPECT_REFUSED(s.b, "key #0: key length 18446744073709551612 exceeds the", "(at offset 24)");
}

TEST(GgufCorrupt, HugeStringValueLength) {
  Bytes b = Raw().header(0, 1).str("k").u32(8).u64(uint64_t{1} << 40).bytes("abc").b;
  EXPECT_REFUSED(b, "key 'k': string value length 1099511627776 exceeds the 3 bytes left",
                 "(at offset 37)");
}

TEST(GgufCorrupt, HugeArrayCount) {
  Bytes b = Raw().header(0, 1).str("k").u32(9).u32(6).u64(uint64_t{1} << 62).pad(16).b;
  EXPECT_REFUSED(b, "key 'k': array of 4611686018427387904 f32 elements cannot fit in the 16",
                 "(at offset 41)");
  Bytes s = Raw().header(0, 1).str("k").u32(9).u32(8).u64(3).str("a").b;  // 3 strings, 1 there
  EXPECT_REFUSED(s, "key 'k': array of 3 string elements cannot fit in the 9 bytes left");
  Bytes t = Raw().header(0, 1).str("k").u32(9).u32(8).u64(2).str("a").u64(1000).bytes("x").b;
  EXPECT_REFUSED(t, "key 'k': string value length 1000 exceeds the 1 bytes left");
}

TEST(GgufCorrupt, UnknownValueTypes) {
  Bytes b = Raw().header(0, 1).str("k").u32(13).pad().b;
  EXPECT_REFUSED(b, "key 'k': unknown value type 13", "(at offset 33)");
  Bytes a = Raw().header(0, 1).str("k").u32(9).u32(77).u64(0).pad().b;
  EXPECT_REFUSED(a, "key 'k': unknown array element type 77", "(at offset 37)");
  Bytes n = Raw().header(0, 1).str("k").u32(9).u32(9).u64(0).pad().b;
  EXPECT_REFUSED(n, "key 'k': nested arrays are not supported");
}

TEST(GgufCorrupt, BadBool) {
  Bytes b = Raw().header(0, 1).str("k").u32(7).u8(2).pad().b;
  EXPECT_REFUSED(b, "key 'k': bool value is 2, not 0 or 1", "(at offset 37)");
  Bytes a = Raw().header(0, 1).str("k").u32(9).u32(7).u64(2).u8(1).u8(9).pad().b;
  EXPECT_REFUSED(a, "key 'k': bool value is 9");
}

TEST(GgufCorrupt, EmptyKey) {
  Bytes b = Raw().header(0, 1).str("").u32(4).u32(1).pad().b;
  EXPECT_REFUSED(b, "key #0: empty key", "(at offset 24)");
}

TEST(GgufCorrupt, KeyWithControlCharacter) {
  Bytes b = Raw().header(0, 1).str("a\x01z").u32(4).u32(1).pad().b;
  EXPECT_REFUSED(b, "key #0: key 'a\\x01z' contains control character 0x01");
}

TEST(GgufCorrupt, DuplicateKey) {
  Bytes b = Raw().header(0, 2).str("k").u32(4).u32(1).str("k").u32(5).u32(2).pad().b;
  EXPECT_REFUSED(b, "key 'k': duplicate key (first defined at offset 37)", "(at offset 41)");
}

TEST(GgufCorrupt, AlignmentNotU32) {
  Bytes b = Raw().header(0, 1).str("general.alignment").u32(10).u64(64).pad().b;
  EXPECT_REFUSED(b, "key 'general.alignment': general.alignment must be a u32, found u64");
}

TEST(GgufCorrupt, AlignmentNotPowerOfTwo) {
  for (uint32_t a : {0u, 24u, 3u}) {
    Bytes b = Raw().header(0, 1).str("general.alignment").u32(4).u32(a).pad().b;
    EXPECT_REFUSED(b, "key 'general.alignment': alignment", "is not a power of two",
                   "(at offset 53)");
  }
}

TEST(GgufCorrupt, UnknownTensorType) {
  Sample s;
  put_u32(s.b, Sample::type_at(s.w_record, 2), 99);
  EXPECT_REFUSED(s.b, "tensor 'w': unknown or removed ggml type type 99 (id 99)");
  Sample r;
  put_u32(r.b, Sample::type_at(r.w_record, 2), 4);
  EXPECT_REFUSED(r.b, "tensor 'w': unknown or removed ggml type q4_2 (id 4)",
                 fmt::format("(at offset {})", Sample::type_at(r.w_record, 2)));
}

TEST(GgufCorrupt, NDimsOutOfRange) {
  for (uint32_t n : {0u, 5u, 0xffffffffu}) {
    Sample s;
    put_u32(s.b, Sample::n_dims_at(s.w_record), n);
    EXPECT_REFUSED(s.b, fmt::format("tensor 'w': n_dims {} is outside 1..4", n),
                   fmt::format("(at offset {})", Sample::n_dims_at(s.w_record)));
  }
}

TEST(GgufCorrupt, NegativeDimension) {
  Sample s;
  put_u64(s.b, Sample::ne_at(s.w_record, 1), static_cast<uint64_t>(-2));
  EXPECT_REFUSED(s.b, "tensor 'w': ne[1] = -2 is negative");
}

TEST(GgufCorrupt, ElementCountOverflow) {
  Bytes b = Raw()
                .header(1, 0)
                .str("t")
                .u32(3)
                .u64(uint64_t{1} << 31)
                .u64(uint64_t{1} << 31)
                .u64(uint64_t{1} << 2)
                .u32(0)
                .u64(0)
                .pad()
                .b;
  EXPECT_REFUSED(b, "tensor 't': element count overflows int64 at ne[2] = 4");
}

TEST(GgufCorrupt, ByteSizeOverflow) {
  // 2^62 f64 elements: the element count fits in int64, the byte count does not.
  Bytes b = Raw().header(1, 0).str("t").u32(1).u64(uint64_t{1} << 62).u32(28).u64(0).pad().b;
  EXPECT_REFUSED(b, "tensor 't': data size of 4611686018427387904 f64 elements overflows");
}

TEST(GgufCorrupt, RowNotMultipleOfBlock) {
  Sample s;
  put_u64(s.b, Sample::ne_at(s.v_record, 0), 33);
  EXPECT_REFUSED(s.b, "tensor 'v': row of 33 elements is not a multiple of the q8_0 block size 32");
}

TEST(GgufCorrupt, MisalignedOffset) {
  Sample s;
  put_u64(s.b, Sample::offset_at(s.v_record, 1), 40);
  EXPECT_REFUSED(s.b, "tensor 'v': data offset 40 is not a multiple of the alignment 32",
                 fmt::format("(at offset {})", Sample::offset_at(s.v_record, 1)));
}

TEST(GgufCorrupt, DataOutOfBounds) {
  Sample s;
  auto f = GgufFile::from_memory(s.b.data(), s.b.size(), "ok");
  uint64_t data = f.data_offset();
  put_u64(s.b, Sample::offset_at(s.v_record, 1), 64);  // 34 bytes at 64 of a 96-byte section
  EXPECT_EQ(error_of(s.b),
            fmt::format("gguf: bad.gguf: tensor 'v': data [{}, {}) runs past the end of the file "
                        "({} bytes) (record at offset {})",
                        data + 64, data + 98, s.b.size(), s.v_record));
  put_u64(s.b, Sample::offset_at(s.v_record, 1), uint64_t{1} << 50);
  EXPECT_REFUSED(s.b, "tensor 'v': data offset 1125899906842624 is past the end of the file");
  Sample t;
  put_u64(t.b, Sample::ne_at(t.w_record, 1), uint64_t{1} << 40);
  EXPECT_REFUSED(t.b, "tensor 'w': data [", "runs past the end of the file");
}

TEST(GgufCorrupt, DataSectionPastEnd) {
  // A tensor record whose file ends before the aligned start of the data section.
  Bytes b = Raw().header(1, 0).str("t").u32(1).u64(0).u32(0).u64(0).b;
  EXPECT_REFUSED(b, "tensor data: the tensor data section would start at offset 64, past the end");
}

TEST(GgufCorrupt, OverlappingTensors) {
  Sample s;
  put_u64(s.b, Sample::offset_at(s.v_record, 1), 0);  // v now starts where w does
  EXPECT_REFUSED(s.b, "overlaps tensor", "(record at offset");
}

TEST(GgufCorrupt, DuplicateTensorName) {
  Sample s;
  s.b[s.v_record + 8] = 'w';
  EXPECT_REFUSED(s.b, "tensor 'w': duplicate tensor name",
                 fmt::format("(first record at offset {})", s.w_record),
                 fmt::format("(at offset {})", s.v_record));
}

TEST(GgufCorrupt, EmptyTensorName) {
  Bytes b = Raw().header(1, 0).str("").u32(1).u64(1).u32(0).u64(0).pad().b;
  EXPECT_REFUSED(b, "tensor #0: empty tensor name", "(at offset 24)");
}

TEST(GgufCorrupt, MissingAndNonRegularFiles) {
  auto open_error = [](const std::string& path) -> std::string {
    try {
      GgufFile::open(path);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  std::string e = open_error("/nonexistent/model.gguf");
  EXPECT_EQ(e, "gguf: /nonexistent/model.gguf: cannot open: No such file or directory");
  e = open_error(std::filesystem::temp_directory_path().string());
  EXPECT_NE(e.find("not a regular file"), std::string::npos) << e;

  // A truncated file on disk goes through the mmap path.
  Sample s;
  auto path = std::filesystem::temp_directory_path() /
              ("gguf_corrupt_" + std::to_string(getpid()) + ".gguf");
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(s.b.data()), 100);
  }
  e = open_error(path.string());
  EXPECT_NE(e.find("gguf: " + path.string() + ": "), std::string::npos) << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
  { std::ofstream empty(path, std::ios::binary | std::ios::trunc); }
  e = open_error(path.string());
  EXPECT_NE(e.find("header: truncated: the magic needs 4 bytes"), std::string::npos) << e;
  std::filesystem::remove(path);
}

// Random byte flips of a valid file: every outcome is a clean parse or a channel::Error, and
// whatever parses can be read through every accessor (ASan checks the bounds).
TEST(GgufCorrupt, RandomMutationsNeverCrash) {
  Sample s;
  std::mt19937 rng(12345);
  int refused = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    Bytes b = s.b;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) b[rng() % b.size()] = static_cast<uint8_t>(rng());
    if (rng() % 8 == 0) b.resize(rng() % b.size());
    try {
      auto f = GgufFile::from_memory(b.data(), b.size(), "m");
      for (const GgufKv& kv : f.kvs()) {
        try {
          if (kv.type == GgufValueType::STRING) f.get_string(kv.key);
          if (kv.type == GgufValueType::ARRAY) f.get_int_array(kv.key);
          if (kv.type != GgufValueType::ARRAY && kv.type != GgufValueType::STRING) {
            f.get_float(kv.key);
          }
        } catch (const Error&) {
        }
      }
      uint64_t sum = 0;
      for (const TensorInfo& t : f.tensors()) {
        for (size_t i = 0; i < t.n_bytes; ++i) sum += t.data[i];
      }
      EXPECT_GE(sum, 0u);
    } catch (const Error&) {
      ++refused;
    }
  }
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace channel
