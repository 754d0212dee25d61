#include "gguf/gguf_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "util/error.h"

namespace channel {

namespace {

constexpr size_t kMaxTensorName = 63;  // llama.cpp's GGML_MAX_NAME minus the terminator

void put_bytes(std::vector<uint8_t>& out, const void* p, size_t n) {
  if (n == 0) return;
  size_t at = out.size();
  out.resize(at + n);
  std::memcpy(out.data() + at, p, n);
}
template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  put_bytes(out, &v, sizeof(T));
}
void put_string(std::vector<uint8_t>& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  put_bytes(out, s.data(), s.size());
}

uint64_t align_up(uint64_t n, uint64_t a) {
  return (n + a - 1) / a * a;
}

}  // namespace

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  if (alignment == 0 || !std::has_single_bit(alignment)) {
    throw_error("gguf writer: alignment {} is not a power of two", alignment);
  }
  if (alignment != 32) {
    std::vector<uint8_t> v;
    put<uint32_t>(v, alignment);
    set_raw("general.alignment", GgufValueType::U32, std::move(v));
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
  std::vector<uint8_t> rec;
  put_string(rec, key);
  put<uint32_t>(rec, static_cast<uint32_t>(type));
  rec.insert(rec.end(), value.begin(), value.end());
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
  std::vector<uint8_t> v;
  put<uint32_t>(v, static_cast<uint32_t>(elem));
  put<uint64_t>(v, count);
  put_bytes(v, data, n_bytes);
  set_raw(key, GgufValueType::ARRAY, std::move(v));
}

#define CHANNEL_GGUF_SCALAR(fn, T, tag)                                               \
  void GgufWriter::fn(std::string_view key, T v) {                                    \
    std::vector<uint8_t> b;                                                           \
    put<T>(b, v);                                                                     \
    set_raw(key, GgufValueType::tag, std::move(b));                                   \
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
  std::vector<uint8_t> b;
  put_string(b, v);
  set_raw(key, GgufValueType::STRING, std::move(b));
}

void GgufWriter::set_string_array(std::string_view key, const std::vector<std::string>& v) {
  std::vector<uint8_t> b;
  for (const std::string& s : v) put_string(b, s);
  set_array_raw(key, GgufValueType::STRING, v.size(), b.data(), b.size());
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
  std::vector<uint8_t> head;
  put_bytes(head, "GGUF", 4);
  put<uint32_t>(head, 3);
  put<uint64_t>(head, tensors_.size());
  put<uint64_t>(head, kv_records_.size());
  for (const auto& rec : kv_records_) head.insert(head.end(), rec.begin(), rec.end());
  uint64_t offset = 0;  // within the data section
  for (const PendingTensor& t : tensors_) {
    put_string(head, t.name);
    put<uint32_t>(head, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) put<uint64_t>(head, static_cast<uint64_t>(d));
    put<uint32_t>(head, static_cast<uint32_t>(t.type));
    put<uint64_t>(head, offset);
    offset = align_up(offset + t.data.size(), alignment_);
  }
  head.resize(align_up(head.size(), alignment_), 0);
  out(head.data(), head.size());
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
  std::vector<uint8_t> bytes;
  emit([&](const void* p, size_t n) { put_bytes(bytes, p, n); });
  return bytes;
}

void GgufWriter::write_file(const std::string& path) const {
  std::string tmp = fmt::format("{}.tmp.{}", path, getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_error("gguf writer: cannot create {}: {}", tmp, std::strerror(errno));
  auto fail = [&](const char* what) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw_error("gguf writer: cannot {} {}: {}", what, tmp, std::strerror(err));
  };
  try {
    emit([&](const void* p, size_t n) {
      const char* b = static_cast<const char*>(p);
      while (n > 0) {
        ssize_t w = ::write(fd, b, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) fail("write");
        b += w;
        n -= static_cast<size_t>(w);
      }
    });
  } catch (...) {
    ::unlink(tmp.c_str());  // fail() already closed the descriptor
    throw;
  }
  if (::fsync(fd) != 0) fail("fsync");
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw_error("gguf writer: cannot close {}: {}", tmp, std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw_error("gguf writer: cannot rename {} to {}: {}", tmp, path, std::strerror(err));
  }
  // Make the rename itself durable.
  std::string dir = std::filesystem::path(path).parent_path().string();
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace channel
