// GgufWriter: builds a GGUF v3 file in memory (metadata + tensors) and writes it out
// atomically, in the layout llama.cpp expects (tensor data in record order, each tensor and
// the data section aligned). Used by `channel mkmodel` and by tests that make fixtures.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_reader.h"

namespace channel {

class GgufWriter {
 public:
  // `alignment` must be a power of two; other than 32 it is recorded as general.alignment.
  explicit GgufWriter(uint32_t alignment = 32);

  // Scalars. Setting a key again replaces its value and keeps its position.
  void set_u8(std::string_view key, uint8_t v);
  void set_i8(std::string_view key, int8_t v);
  void set_u16(std::string_view key, uint16_t v);
  void set_i16(std::string_view key, int16_t v);
  void set_u32(std::string_view key, uint32_t v);
  void set_i32(std::string_view key, int32_t v);
  void set_u64(std::string_view key, uint64_t v);
  void set_i64(std::string_view key, int64_t v);
  void set_f32(std::string_view key, float v);
  void set_f64(std::string_view key, double v);
  void set_bool(std::string_view key, bool v);
  void set_string(std::string_view key, std::string_view v);

  // Arrays.
  void set_u8_array(std::string_view key, const std::vector<uint8_t>& v);
  void set_i8_array(std::string_view key, const std::vector<int8_t>& v);
  void set_u16_array(std::string_view key, const std::vector<uint16_t>& v);
  void set_i16_array(std::string_view key, const std::vector<int16_t>& v);
  void set_u32_array(std::string_view key, const std::vector<uint32_t>& v);
  void set_i32_array(std::string_view key, const std::vector<int32_t>& v);
  void set_u64_array(std::string_view key, const std::vector<uint64_t>& v);
  void set_i64_array(std::string_view key, const std::vector<int64_t>& v);
  void set_f32_array(std::string_view key, const std::vector<float>& v);
  void set_f64_array(std::string_view key, const std::vector<double>& v);
  void set_bool_array(std::string_view key, const std::vector<bool>& v);
  void set_string_array(std::string_view key, const std::vector<std::string>& v);

  // Copies a key and its value, any type, from a file being read (e.g. to re-encode a model).
  void copy_kv(const GgufKv& kv);

  // ne[0] is the contiguous dimension; `data` holds the encoded bytes of that type. Throws
  // channel::Error on a bad name (empty, >= 64 bytes, duplicate), shape or data size.
  void add_tensor(std::string_view name, GgmlType type, std::vector<int64_t> ne,
                  std::vector<uint8_t> data);

  std::vector<uint8_t> to_bytes() const;
  // Writes to a temporary file beside `path`, fsyncs, renames it over `path`.
  void write_file(const std::string& path) const;

 private:
  struct PendingTensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    std::vector<uint8_t> data;  // [n_bytes] encoded as `type`
  };
  void set_raw(std::string_view key, GgufValueType type, std::vector<uint8_t> value);
  void set_array_raw(std::string_view key, GgufValueType elem, uint64_t count, const void* data,
                     size_t n_bytes);
  // Streams the whole file through `out` (bytes, count).
  void emit(const std::function<void(const void*, size_t)>& out) const;

  uint32_t alignment_;
  std::vector<std::vector<uint8_t>> kv_records_;  // encoded key/value records, in order
  std::vector<std::string> kv_keys_;              // [kv_records_.size()]
  std::vector<PendingTensor> tensors_;
};

}  // namespace channel
