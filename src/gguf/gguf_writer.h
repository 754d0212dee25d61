// GgufWriter: builds a GGUF v3 file in memory (metadata + tensors) and writes it out
// atomically. Used by `channel mkmodel` and by tests that make fixtures.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_reader.h"

namespace channel {

class GgufWriter {
 public:
  explicit GgufWriter(uint32_t alignment = 32);

  void set_u32(std::string_view key, uint32_t v);
  void set_i32(std::string_view key, int32_t v);
  void set_u64(std::string_view key, uint64_t v);
  void set_f32(std::string_view key, float v);
  void set_bool(std::string_view key, bool v);
  void set_string(std::string_view key, std::string_view v);
  void set_string_array(std::string_view key, const std::vector<std::string>& v);
  void set_f32_array(std::string_view key, const std::vector<float>& v);
  void set_i32_array(std::string_view key, const std::vector<int32_t>& v);
  void set_u32_array(std::string_view key, const std::vector<uint32_t>& v);

  // ne[0] is the contiguous dimension; `data` holds the encoded bytes of that type.
  void add_tensor(std::string_view name, GgmlType type, std::vector<int64_t> ne,
                  std::vector<uint8_t> data);

  std::vector<uint8_t> to_bytes() const;
  // Writes to `path.tmp`, fsyncs, renames over `path`.
  void write_file(const std::string& path) const;

 private:
  struct Kv;
  struct Tensor;
  uint32_t alignment_;
  std::vector<std::vector<uint8_t>> kv_records_;  // encoded key/value records, in order
  std::vector<std::string> kv_keys_;
  struct PendingTensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    std::vector<uint8_t> data;
  };
  std::vector<PendingTensor> tensors_;
};

}  // namespace channel
