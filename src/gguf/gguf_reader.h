// GgufFile: a validated, read-only view of a GGUF (v2 or v3) file, memory-mapped or
// borrowed from memory. Every key, array and tensor record is checked at open; any
// problem throws channel::Error naming the file, the field and the byte offset.
// Tensor data is never copied: TensorInfo::data points into the mapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/ggml_type.h"

namespace channel {

// GGUF metadata value types, with the ids of the file format.
enum class GgufValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};

// "u8", "string", "array", ...; "value type N" for ids outside the format.
std::string_view gguf_value_type_name(GgufValueType t);
// Bytes of one value of a fixed-size type; 0 for STRING and ARRAY.
uint64_t gguf_value_size(GgufValueType t);

// One metadata key/value. Scalars are widened on read; strings and arrays point into the file.
struct GgufKv {
  std::string key;
  GgufValueType type;
  GgufValueType array_type = GgufValueType::U8;  // element type when type == ARRAY
  uint64_t array_len = 0;                        // element count when type == ARRAY
  uint64_t offset = 0;  // byte offset of the value in the file (for error messages)
  // Raw little-endian value bytes in the mapping: the scalar itself; for STRING the u64
  // length followed by the bytes; for ARRAY the first element.
  const uint8_t* value = nullptr;
};

struct TensorInfo {
  std::string name;
  uint32_t type_id = 0;  // ggml type id (see ggml_type.h); any type ggml defines
  int n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ne[0] is the contiguous (input) dimension
  uint64_t offset = 0;           // relative to the start of the tensor data section
  size_t n_bytes = 0;
  const uint8_t* data = nullptr;  // into the mapping, in bounds and aligned as the file says
  uint64_t record_offset = 0;     // byte offset of the tensor's info record (for messages)
  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

class GgufFile {
 public:
  // Maps and validates a file. Throws channel::Error on any problem.
  static GgufFile open(const std::string& path);
  // Validates a buffer the caller keeps alive (embedded model, fuzzing). Tensor data is
  // only as aligned in memory as the buffer itself.
  static GgufFile from_memory(const void* data, size_t size, std::string name);

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

  const std::string& name() const;  // path or given name, used in error messages
  uint32_t version() const;
  uint32_t alignment() const;
  size_t file_size() const;
  // True when the tensor data is this object's read-only mapping of the file (open), false
  // for a borrowed buffer (from_memory).
  bool mapped() const;
  uint64_t data_offset() const;  // file offset of the tensor data section
  std::span<const GgufKv> kvs() const;
  std::span<const TensorInfo> tensors() const;

  const GgufKv* find(std::string_view key) const;  // nullptr when absent
  const TensorInfo* find_tensor(std::string_view name) const;

  // Traits of a tensor's type for computing with it. A file may list types Channel cannot
  // compute with (q6_K, ...): they are sized and validated at open, and this throws
  // channel::Error naming the file, the tensor and the type.
  GgmlTypeTraits tensor_traits(const TensorInfo& t) const;

  // Typed getters: throw channel::Error naming the key when it is absent or of a type
  // that cannot represent the request (integers accept any integer type in range).
  std::string get_string(std::string_view key) const;
  uint64_t get_uint(std::string_view key) const;
  int64_t get_int(std::string_view key) const;
  double get_float(std::string_view key) const;  // accepts f32, f64 and integers
  bool get_bool(std::string_view key) const;
  // Same, returning `fallback` when the key is absent (but still throwing on a wrong type).
  std::string get_string_or(std::string_view key, std::string fallback) const;
  uint64_t get_uint_or(std::string_view key, uint64_t fallback) const;
  int64_t get_int_or(std::string_view key, int64_t fallback) const;
  double get_float_or(std::string_view key, double fallback) const;
  bool get_bool_or(std::string_view key, bool fallback) const;

  // Arrays (throw when absent or of another element type). String views point into the file.
  std::vector<std::string_view> get_string_array(std::string_view key) const;
  std::vector<float> get_f32_array(std::string_view key) const;
  std::vector<int64_t> get_int_array(std::string_view key) const;  // any integer element type

 private:
  struct Impl;
  friend class GgufParser;
  explicit GgufFile(std::unique_ptr<Impl> impl);
  const GgufKv& require(std::string_view key) const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace channel
