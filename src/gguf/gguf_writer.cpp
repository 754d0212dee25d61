#include "gguf/gguf_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "util/bytes.h"
#include "util/error.h"
#include "util/file.h"

namespace channel {

namespace {

constexpr size_t kMaxTensorName = 63;  // llama.cpp's GGML_MAX_NAME minus the terminator

uint64_t align_up(uint64_t n, uint64_t a) {
  return (n + a - 1) / a * a;
}

}  // namespace

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  if (alignment == 0 || !std::has_single_bit(alignment)) {
    throw_error("gguf writer: alignment {} is not a power of two", alignment);
  }
  if (alignment != 32) {
    ByteWriter v;
    v.put<uint32_t>(alignment);
    set_raw("general.alignment", GgufValueType::U32, std::move(v.out));
  }
}

void GgufWriter::set_raw(std::string_view key, GgufValueType type, std::vector<uint8_t> value) {
  if (key.empty()) throw_error("gguf writer: empty key");
  if (key.size() > 65535) throw_error("gguf writer: key of {} bytes is too long", key.size());
  // The data layout depends on the alignment, so only the constructor's value may be recorded.
  if (key == "general.alignment" && (type != GgufValueType::U32 || value.size() != 4 ||
                                     std::memcmp(value.data(), &alignment_, 4) != 0)) {
    throw_error("gguf writer: general.alignment must be the u32 {} given to the constructor",
                alignment_);
  }
  ByteWriter w;
  w.string(key);
  w.put<uint32_t>(static_cast<uint32_t>(type));
  w.bytes(value.data(), value.size());
  std::vector<uint8_t> rec = std::move(w.out);
  auto it = std::find(kv_keys_.begin(), kv_keys_.end(), key);
  if (it != kv_keys_.end()) {
    kv_records_[it - kv_keys_.begin()] = std::move(rec);
  } else {
    kv_keys_.emplace_back(key);
    kv_records_.push_back(std::move(rec));
  }
}

void GgufWriter::set_array_raw(std::string_view key, GgufValueType elem, uint64_t count,
                               const void* data, size_t n_bytes) {
  ByteWriter v;
  v.put<uint32_t>(static_cast<uint32_t>(elem));
  v.put<uint64_t>(count);
  v.bytes(data, n_bytes);
  set_raw(key, GgufValueType::ARRAY, std::move(v.out));
}

#define CHANNEL_GGUF_SCALAR(fn, T, tag)                                               \
  void GgufWriter::fn(std::string_view key, T v) {                                    \
    ByteWriter b;                                                                     \
    b.put<T>(v);                                                                      \
    set_raw(key, GgufValueType::tag, std::move(b.out));                               \
  }                                                                                   \
  void GgufWriter::fn##_array(std::string_view key, const std::vector<T>& v) {        \
    set_array_raw(key, GgufValueType::tag, v.size(), v.data(), v.size() * sizeof(T)); \
  }
CHANNEL_GGUF_SCALAR(set_u8, uint8_t, U8)
CHANNEL_GGUF_SCALAR(set_i8, int8_t, I8)
CHANNEL_GGUF_SCALAR(set_u16, uint16_t, U16)
CHANNEL_GGUF_SCALAR(set_i16, int16_t, I16)
CHANNEL_GGUF_SCALAR(set_u32, uint32_t, U32)
CHANNEL_GGUF_SCALAR(set_i32, int32_t, I32)
CHANNEL_GGUF_SCALAR(set_u64, uint64_t, U64)
CHANNEL_GGUF_SCALAR(set_i64, int64_t, I64)
CHANNEL_GGUF_SCALAR(set_f32, float, F32)
CHANNEL_GGUF_SCALAR(set_f64, double, F64)
#undef CHANNEL_GGUF_SCALAR

void GgufWriter::set_bool(std::string_view key, bool v) {
  set_raw(key, GgufValueType::BOOL, {static_cast<uint8_t>(v ? 1 : 0)});
}

void GgufWriter::set_bool_array(std::string_view key, const std::vector<bool>& v) {
  std::vector<uint8_t> b(v.begin(), v.end());  // [v.size()] 0 or 1
  set_array_raw(key, GgufValueType::BOOL, v.size(), b.data(), b.size());
}

void GgufWriter::set_string(std::string_view key, std::string_view v) {
  ByteWriter b;
  b.string(v);
  set_raw(key, GgufValueType::STRING, std::move(b.out));
}

void GgufWriter::set_string_array(std::string_view key, const std::vector<std::string>& v) {
  ByteWriter b;
  for (const std::string& s : v) b.string(s);
  set_array_raw(key, GgufValueType::STRING, v.size(), b.out.data(), b.out.size());
}

namespace {

// Bytes of one encoded string (u64 length, then the bytes) at p.
uint64_t string_bytes(const uint8_t* p) {
  uint64_t n;
  std::memcpy(&n, p, sizeof(n));
  return 8 + n;
}

}  // namespace

void GgufWriter::copy_kv(const GgufKv& kv) {
  if (kv.type == GgufValueType::ARRAY) {
    uint64_t bytes = 0;
    if (kv.array_type == GgufValueType::STRING) {
      for (uint64_t i = 0; i < kv.array_len; ++i) bytes += string_bytes(kv.value + bytes);
    } else {
      bytes = kv.array_len * gguf_value_size(kv.array_type);
    }
    set_array_raw(kv.key, kv.array_type, kv.array_len, kv.value, static_cast<size_t>(bytes));
    return;
  }
  const uint64_t bytes =
      kv.type == GgufValueType::STRING ? string_bytes(kv.value) : gguf_value_size(kv.type);
  set_raw(kv.key, kv.type, std::vector<uint8_t>(kv.value, kv.value + bytes));
}

void GgufWriter::add_tensor(std::string_view name, GgmlType type, std::vector<int64_t> ne,
                            std::vector<uint8_t> data) {
  if (name.empty() || name.size() > kMaxTensorName) {
    throw_error("gguf writer: tensor name '{}' must be 1..{} bytes", name, kMaxTensorName);
  }
  for (const PendingTensor& t : tensors_) {
    if (t.name == name) throw_error("gguf writer: duplicate tensor '{}'", name);
  }
  auto layout = ggml_type_layout(static_cast<uint32_t>(type));
  if (!layout) {
    throw_error("gguf writer: tensor '{}': unknown ggml type {}", name,
                ggml_type_name(static_cast<uint32_t>(type)));
  }
  if (ne.empty() || ne.size() > 4) {
    throw_error("gguf writer: tensor '{}': {} dimensions, expected 1..4", name, ne.size());
  }
  uint64_t n = 1;
  for (int64_t d : ne) {
    if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) {
      throw_error("gguf writer: tensor '{}': bad dimension {}", name, d);
    }
  }
  if (ne[0] % layout->block_elems != 0) {
    throw_error("gguf writer: tensor '{}': ne[0] = {} is not a multiple of the {} block size {}",
                name, ne[0], layout->name, layout->block_elems);
  }
  uint64_t n_bytes = n / layout->block_elems * layout->block_bytes;
  if (data.size() != n_bytes) {
    throw_error("gguf writer: tensor '{}': {} bytes of data, expected {} for {} {} elements", name,
                data.size(), n_bytes, n, layout->name);
  }
  tensors_.push_back({std::string(name), type, std::move(ne), std::move(data)});
}

void GgufWriter::emit(const std::function<void(const void*, size_t)>& out) const {
  ByteWriter head;
  head.bytes("GGUF", 4);
  head.put<uint32_t>(3);
  head.put<uint64_t>(tensors_.size());
  head.put<uint64_t>(kv_records_.size());
  for (const auto& rec : kv_records_) head.bytes(rec.data(), rec.size());
  uint64_t offset = 0;  // within the data section
  for (const PendingTensor& t : tensors_) {
    head.string(t.name);
    head.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) head.put<uint64_t>(static_cast<uint64_t>(d));
    head.put<uint32_t>(static_cast<uint32_t>(t.type));
    head.put<uint64_t>(offset);
    offset = align_up(offset + t.data.size(), alignment_);
  }
  head.out.resize(align_up(head.out.size(), alignment_), 0);
  out(head.out.data(), head.out.size());
  static const std::vector<uint8_t> zeros(1 << 16, 0);
  for (const PendingTensor& t : tensors_) {
    out(t.data.data(), t.data.size());
    size_t pad = align_up(t.data.size(), alignment_) - t.data.size();
    while (pad > 0) {
      size_t n = std::min(pad, zeros.size());
      out(zeros.data(), n);
      pad -= n;
    }
  }
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  ByteWriter bytes;
  emit([&](const void* p, size_t n) { bytes.bytes(p, n); });
  return std::move(bytes.out);
}

void GgufWriter::write_file(const std::string& path) const {
  const AtomicWriteOptions options{.what = "gguf writer"};
  atomic_write(
      path,
      [&](int fd) {
        emit([&](const void* p, size_t n) {
          if (!write_all(fd, p, n)) throw_file_error(options.what, path, "write");
        });
      },
      options);
}

}  // namespace channel
