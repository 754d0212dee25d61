#include "gguf/gguf_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>

#include "util/error.h"

namespace channel {

static_assert(std::endian::native == std::endian::little, "GGUF values are read in place");

namespace {

constexpr uint32_t kDefaultAlignment = 32;
constexpr uint64_t kMaxKeyBytes = 65535;  // the GGUF spec's limit on key length
// Smallest possible records, used to reject counts that cannot fit in the bytes left.
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;  // key len, 1-byte key, type, u8
constexpr uint64_t kMinTensorBytes =
    8 + 1 + 4 + 8 + 4 + 8;  // name len, name, n_dims, ne, type, offset


bool is_integer(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8:
    case GgufValueType::I8:
    case GgufValueType::U16:
    case GgufValueType::I16:
    case GgufValueType::U32:
    case GgufValueType::I32:
    case GgufValueType::U64:
    case GgufValueType::I64:
      return true;
    default:
      return false;
  }
}

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// An integer value of any GGUF integer type, without losing range.
struct IntValue {
  bool negative;
  uint64_t magnitude;  // the value when !negative; -value when negative
};

IntValue load_integer(GgufValueType t, const uint8_t* p) {
  auto from_signed = [](int64_t v) {
    return v < 0 ? IntValue{true, 0 - static_cast<uint64_t>(v)} : IntValue{false, uint64_t(v)};
  };
  switch (t) {
    case GgufValueType::U8:
      return {false, load<uint8_t>(p)};
    case GgufValueType::U16:
      return {false, load<uint16_t>(p)};
    case GgufValueType::U32:
      return {false, load<uint32_t>(p)};
    case GgufValueType::U64:
      return {false, load<uint64_t>(p)};
    case GgufValueType::I8:
      return from_signed(load<int8_t>(p));
    case GgufValueType::I16:
      return from_signed(load<int16_t>(p));
    case GgufValueType::I32:
      return from_signed(load<int32_t>(p));
    case GgufValueType::I64:
      return from_signed(load<int64_t>(p));
    default:
      return {false, 0};
  }
}

// Keys and names as they appear in messages: printable ASCII kept, other bytes as \xNN,
// long ones cut, so a hostile file cannot inject control characters or huge lines.
std::string printable(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < 200; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (s.size() > 200) out += fmt::format("...({} bytes)", s.size());
  return out;
}

}  // namespace

// Size of a fixed-size value type; 0 for STRING and ARRAY.
uint64_t gguf_value_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8:
    case GgufValueType::I8:
    case GgufValueType::BOOL:
      return 1;
    case GgufValueType::U16:
    case GgufValueType::I16:
      return 2;
    case GgufValueType::U32:
    case GgufValueType::I32:
    case GgufValueType::F32:
      return 4;
    case GgufValueType::U64:
    case GgufValueType::I64:
    case GgufValueType::F64:
      return 8;
    case GgufValueType::STRING:
    case GgufValueType::ARRAY:
      return 0;
  }
  return 0;
}

std::string_view gguf_value_type_name(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8:
      return "u8";
    case GgufValueType::I8:
      return "i8";
    case GgufValueType::U16:
      return "u16";
    case GgufValueType::I16:
      return "i16";
    case GgufValueType::U32:
      return "u32";
    case GgufValueType::I32:
      return "i32";
    case GgufValueType::F32:
      return "f32";
    case GgufValueType::BOOL:
      return "bool";
    case GgufValueType::STRING:
      return "string";
    case GgufValueType::ARRAY:
      return "array";
    case GgufValueType::U64:
      return "u64";
    case GgufValueType::I64:
      return "i64";
    case GgufValueType::F64:
      return "f64";
  }
  return "unknown value type";
}

struct GgufFile::Impl {
  std::string name;
  const uint8_t* data = nullptr;  // [size]
  size_t size = 0;
  void* mapping = nullptr;  // owned mmap, or nullptr for a borrowed buffer
  size_t mapping_size = 0;
  uint32_t version = 0;
  uint32_t alignment = kDefaultAlignment;
  uint64_t data_offset = 0;
  std::vector<GgufKv> kvs;
  std::vector<TensorInfo> tensors;
  std::map<std::string, size_t, std::less<>> kv_index;
  std::map<std::string, size_t, std::less<>> tensor_index;

  ~Impl() {
    if (mapping) munmap(mapping, mapping_size);
  }
};

// Walks the file front to back; every read is bounds-checked and every failure names the
// field being read and the offset where the problem is.
class GgufParser {
 public:
  explicit GgufParser(GgufFile::Impl& f) : f_(f) {}

  void parse() {
    parse_header();
    parse_kvs();
    parse_tensor_infos();
    place_tensor_data();
  }

 private:
  [[noreturn]] void fail(uint64_t at, std::string_view problem) const {
    throw_error("gguf: {}: {}: {} (at offset {})", f_.name, field_, problem, at);
  }
  [[noreturn]] void fail_record(const TensorInfo& t, std::string_view problem) const {
    throw_error("gguf: {}: tensor '{}': {} (record at offset {})", f_.name, printable(t.name),
                problem, t.record_offset);
  }

  uint64_t left() const { return f_.size - pos_; }

  const uint8_t* take(uint64_t n, std::string_view what) {
    if (n > left()) {
      fail(pos_, fmt::format("truncated: {} needs {} bytes but the file ends after {} ({} bytes)",
                             what, n, left(), f_.size));
    }
    const uint8_t* p = f_.data + pos_;
    pos_ += n;
    return p;
  }
  uint32_t u32(std::string_view what) { return load<uint32_t>(take(4, what)); }
  uint64_t u64(std::string_view what) { return load<uint64_t>(take(8, what)); }

  std::string_view string(std::string_view what) {
    uint64_t at = pos_;
    uint64_t len = u64(fmt::format("the length of the {}", what));
    if (len > left()) {
      fail(at,
           fmt::format("{} length {} exceeds the {} bytes left in the file", what, len, left()));
    }
    return {reinterpret_cast<const char*>(take(len, what)), static_cast<size_t>(len)};
  }

  void parse_header() {
    field_ = "header";
    const uint8_t* magic = take(4, "the magic");
    if (std::memcmp(magic, "GGUF", 4) != 0) {
      fail(0, fmt::format("bad magic \"{}\" (expected \"GGUF\"): not a GGUF file",
                          printable({reinterpret_cast<const char*>(magic), 4})));
    }
    uint64_t at = pos_;
    f_.version = u32("the version");
    if (f_.version != 2 && f_.version != 3) {
      bool swapped = f_.version != 0 && (f_.version & 0xffff) == 0;
      fail(at, fmt::format("unsupported GGUF version {}{} (Channel reads little-endian versions "
                           "2 and 3)",
                           f_.version, swapped ? ", probably a big-endian file" : ""));
    }
    at = pos_;
    n_tensors_ = u64("the tensor count");
    uint64_t at_kv = pos_;
    n_kv_ = u64("the key/value count");
    if (n_kv_ > left() / kMinKvBytes) {
      fail(at_kv, fmt::format("key/value count {} cannot fit in the {} bytes left (each needs at "
                              "least {})",
                              n_kv_, left(), kMinKvBytes));
    }
    if (n_tensors_ > left() / kMinTensorBytes) {
      fail(at, fmt::format("tensor count {} cannot fit in the {} bytes left (each needs at least "
                           "{})",
                           n_tensors_, left(), kMinTensorBytes));
    }
  }

  // Skips (and checks) one value of type t at pos_; the field name is already set.
  void skip_value(GgufValueType t) {
    if (t == GgufValueType::STRING) {
      string("string value");
      return;
    }
    uint64_t at = pos_;
    const uint8_t* p = take(gguf_value_size(t), gguf_value_type_name(t));
    if (t == GgufValueType::BOOL && *p > 1)
      fail(at, fmt::format("bool value is {}, not 0 or 1", *p));
  }

  GgufValueType value_type(std::string_view what) {
    uint64_t at = pos_;
    uint32_t id = u32(what);
    if (id > static_cast<uint32_t>(GgufValueType::F64)) {
      fail(at, fmt::format("unknown {} {}", what, id));
    }
    return static_cast<GgufValueType>(id);
  }

  void parse_kvs() {
    f_.kvs.reserve(n_kv_);
    for (uint64_t i = 0; i < n_kv_; ++i) {
      uint64_t record = pos_;
      field_ = fmt::format("key #{}", i);
      std::string_view key = string("key");
      if (key.empty()) fail(record, "empty key");
      if (key.size() > kMaxKeyBytes) {
        fail(record, fmt::format("key of {} bytes is longer than {}", key.size(), kMaxKeyBytes));
      }
      for (char c : key) {
        unsigned char u = static_cast<unsigned char>(c);
        if (u < 0x20 || u == 0x7f) {
          fail(record,
               fmt::format("key '{}' contains control character 0x{:02x}", printable(key), u));
        }
      }
      field_ = fmt::format("key '{}'", printable(key));
      if (auto it = f_.kv_index.find(key); it != f_.kv_index.end()) {
        fail(record,
             fmt::format("duplicate key (first defined at offset {})", f_.kvs[it->second].offset));
      }
      GgufKv kv;
      kv.key = std::string(key);
      kv.type = value_type("value type");
      kv.offset = pos_;
      if (kv.type == GgufValueType::ARRAY) {
        kv.array_type = value_type("array element type");
        if (kv.array_type == GgufValueType::ARRAY)
          fail(kv.offset, "nested arrays are not supported");
        uint64_t at = pos_;
        kv.array_len = u64("the array length");
        uint64_t elem = kv.array_type == GgufValueType::STRING ? 8 : gguf_value_size(kv.array_type);
        if (kv.array_len > left() / elem) {
          fail(at, fmt::format("array of {} {} elements cannot fit in the {} bytes left",
                               kv.array_len, gguf_value_type_name(kv.array_type), left()));
        }
        kv.value = f_.data + pos_;
        if (kv.array_type == GgufValueType::STRING || kv.array_type == GgufValueType::BOOL) {
          for (uint64_t j = 0; j < kv.array_len; ++j) skip_value(kv.array_type);
        } else {
          take(kv.array_len * elem, "array data");
        }
      } else {
        kv.value = f_.data + pos_;
        skip_value(kv.type);
      }
      if (kv.key == "general.alignment") check_alignment(kv);
      f_.kv_index.emplace(kv.key, f_.kvs.size());
      f_.kvs.push_back(std::move(kv));
    }
  }

  void check_alignment(const GgufKv& kv) {
    if (kv.type != GgufValueType::U32) {
      fail(kv.offset,
           fmt::format("general.alignment must be a u32, found {}", gguf_value_type_name(kv.type)));
    }
    uint32_t a = load<uint32_t>(kv.value);
    if (a == 0 || !std::has_single_bit(a)) {
      fail(kv.offset, fmt::format("alignment {} is not a power of two", a));
    }
    f_.alignment = a;
  }

  void parse_tensor_infos() {
    f_.tensors.reserve(n_tensors_);
    for (uint64_t i = 0; i < n_tensors_; ++i) {
      TensorInfo t;
      t.record_offset = pos_;
      field_ = fmt::format("tensor #{}", i);
      std::string_view name = string("tensor name");
      if (name.empty()) fail(t.record_offset, "empty tensor name");
      field_ = fmt::format("tensor '{}'", printable(name));
      if (auto it = f_.tensor_index.find(name); it != f_.tensor_index.end()) {
        fail(t.record_offset, fmt::format("duplicate tensor name (first record at offset {})",
                                          f_.tensors[it->second].record_offset));
      }
      t.name = std::string(name);

      uint64_t at = pos_;
      uint32_t n_dims = u32("n_dims");
      if (n_dims < 1 || n_dims > 4) fail(at, fmt::format("n_dims {} is outside 1..4", n_dims));
      t.n_dims = static_cast<int>(n_dims);
      uint64_t n_elements = 1;
      const uint64_t ne0_at = pos_;
      for (uint32_t d = 0; d < n_dims; ++d) {
        at = pos_;
        t.ne[d] = static_cast<int64_t>(u64("a dimension"));
        if (t.ne[d] < 0) fail(at, fmt::format("ne[{}] = {} is negative", d, t.ne[d]));
        if (__builtin_mul_overflow(n_elements, static_cast<uint64_t>(t.ne[d]), &n_elements) ||
            n_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          fail(at, fmt::format("element count overflows int64 at ne[{}] = {}", d, t.ne[d]));
        }
      }

      at = pos_;
      t.type_id = u32("the type id");
      auto layout = ggml_type_layout(t.type_id);
      if (!layout) {
        fail(at, fmt::format("unknown or removed ggml type {} (id {})", ggml_type_name(t.type_id),
                             t.type_id));
      }
      if (t.ne[0] % layout->block_elems != 0) {
        fail(ne0_at, fmt::format("row of {} elements is not a multiple of the {} block size {}",
                                 t.ne[0], layout->name, layout->block_elems));
      }
      uint64_t n_bytes = 0;
      if (__builtin_mul_overflow(n_elements / layout->block_elems,
                                 static_cast<uint64_t>(layout->block_bytes), &n_bytes) ||
          n_bytes > std::numeric_limits<size_t>::max()) {
        fail(at, fmt::format("data size of {} {} elements overflows", n_elements, layout->name));
      }
      t.n_bytes = static_cast<size_t>(n_bytes);

      at = pos_;
      t.offset = u64("the data offset");
      // The alignment key precedes the tensor records, so it is known by now.
      if (t.offset % f_.alignment != 0) {
        fail(at, fmt::format("data offset {} is not a multiple of the alignment {}", t.offset,
                             f_.alignment));
      }
      f_.tensor_index.emplace(t.name, f_.tensors.size());
      f_.tensors.push_back(std::move(t));
    }
  }

  void place_tensor_data() {
    uint64_t a = f_.alignment;
    uint64_t start = (pos_ + a - 1) / a * a;  // pos_ <= size, a <= 2^31: no overflow
    f_.data_offset = start;
    if (f_.tensors.empty()) return;
    if (start > f_.size) {
      field_ = "tensor data";
      fail(pos_, fmt::format("the tensor data section would start at offset {}, past the end of "
                             "the file ({} bytes)",
                             start, f_.size));
    }
    uint64_t data_size = f_.size - start;
    for (TensorInfo& t : f_.tensors) {
      if (t.offset > data_size) {
        fail_record(t, fmt::format("data offset {} is past the end of the file ({} bytes, "
                                   "tensor data from offset {})",
                                   t.offset, f_.size, start));
      }
      if (t.n_bytes > data_size - t.offset) {
        uint64_t begin = start + t.offset;
        if (t.n_bytes > f_.size) {
          fail_record(t, fmt::format("data [{}, {} + {}) runs past the end of the file ({} bytes)",
                                     begin, begin, t.n_bytes, f_.size));
        }
        fail_record(t, fmt::format("data [{}, {}) runs past the end of the file ({} bytes)", begin,
                                   begin + t.n_bytes, f_.size));
      }
      t.data = f_.data + start + t.offset;
    }
    // Non-overlap: sort by start and compare each with the furthest-reaching one before it.
    std::vector<size_t> order(f_.tensors.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(),
              [&](size_t x, size_t y) { return f_.tensors[x].offset < f_.tensors[y].offset; });
    const TensorInfo* reach = nullptr;  // the tensor whose data ends furthest so far
    for (size_t i : order) {
      const TensorInfo& t = f_.tensors[i];
      if (t.n_bytes == 0) continue;
      if (reach && t.offset < reach->offset + reach->n_bytes) {
        fail_record(t,
                    fmt::format("data [{}, {}) overlaps tensor '{}' at [{}, {})", start + t.offset,
                                start + t.offset + t.n_bytes, printable(reach->name),
                                start + reach->offset, start + reach->offset + reach->n_bytes));
      }
      if (!reach || t.offset + t.n_bytes > reach->offset + reach->n_bytes) reach = &t;
    }
  }

  GgufFile::Impl& f_;
  uint64_t pos_ = 0;
  std::string field_;
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;
};

GgufFile::GgufFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

GgufFile GgufFile::open(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  impl->name = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_error("gguf: {}: cannot open: {}", path, std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throw_error("gguf: {}: cannot stat: {}", path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw_error("gguf: {}: not a regular file", path);
  }
  impl->size = static_cast<size_t>(st.st_size);
  if (impl->size > 0) {
    void* m = mmap(nullptr, impl->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      throw_error("gguf: {}: cannot map {} bytes: {}", path, impl->size, std::strerror(err));
    }
    impl->mapping = m;
    impl->mapping_size = impl->size;
    impl->data = static_cast<const uint8_t*>(m);
  }
  ::close(fd);  // the mapping stays valid without the descriptor
  GgufParser(*impl).parse();
  return GgufFile(std::move(impl));
}

GgufFile GgufFile::from_memory(const void* data, size_t size, std::string name) {
  auto impl = std::make_unique<Impl>();
  impl->name = std::move(name);
  impl->data = static_cast<const uint8_t*>(data);
  impl->size = data ? size : 0;
  GgufParser(*impl).parse();
  return GgufFile(std::move(impl));
}

const std::string& GgufFile::name() const {
  return impl_->name;
}
uint32_t GgufFile::version() const {
  return impl_->version;
}
uint32_t GgufFile::alignment() const {
  return impl_->alignment;
}
size_t GgufFile::file_size() const {
  return impl_->size;
}
bool GgufFile::mapped() const {
  return impl_->mapping != nullptr;
}
uint64_t GgufFile::data_offset() const {
  return impl_->data_offset;
}
std::span<const GgufKv> GgufFile::kvs() const {
  return impl_->kvs;
}
std::span<const TensorInfo> GgufFile::tensors() const {
  return impl_->tensors;
}

const GgufKv* GgufFile::find(std::string_view key) const {
  auto it = impl_->kv_index.find(key);
  return it == impl_->kv_index.end() ? nullptr : &impl_->kvs[it->second];
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = impl_->tensor_index.find(name);
  return it == impl_->tensor_index.end() ? nullptr : &impl_->tensors[it->second];
}

GgmlTypeTraits GgufFile::tensor_traits(const TensorInfo& t) const {
  auto traits = ggml_type_traits(t.type_id);
  if (!traits) {
    throw_error(
        "gguf: {}: tensor '{}': type {} is not supported by Channel (supported: f32, f16, "
        "bf16, q8_0, q4_0) (record at offset {})",
        impl_->name, printable(t.name), ggml_type_name(t.type_id), t.record_offset);
  }
  return *traits;
}

const GgufKv& GgufFile::require(std::string_view key) const {
  const GgufKv* kv = find(key);
  if (!kv) throw_error("gguf: {}: key '{}' is missing", impl_->name, printable(key));
  return *kv;
}

namespace {

[[noreturn]] void wrong_type(const std::string& file, const GgufKv& kv, std::string_view wanted) {
  std::string found(gguf_value_type_name(kv.type));
  if (kv.type == GgufValueType::ARRAY) {
    found = fmt::format("array of {}", gguf_value_type_name(kv.array_type));
  }
  throw_error("gguf: {}: key '{}': expected {}, found {} (at offset {})", file, printable(kv.key),
              wanted, found, kv.offset);
}

std::string_view load_string(const uint8_t* p) {
  return {reinterpret_cast<const char*>(p + 8), static_cast<size_t>(load<uint64_t>(p))};
}

}  // namespace

std::string GgufFile::get_string(std::string_view key) const {
  const GgufKv& kv = require(key);
  if (kv.type != GgufValueType::STRING) wrong_type(impl_->name, kv, "a string");
  return std::string(load_string(kv.value));
}

uint64_t GgufFile::get_uint(std::string_view key) const {
  const GgufKv& kv = require(key);
  if (!is_integer(kv.type)) wrong_type(impl_->name, kv, "an unsigned integer");
  IntValue v = load_integer(kv.type, kv.value);
  if (v.negative) {
    throw_error("gguf: {}: key '{}': expected an unsigned integer, found -{} (at offset {})",
                impl_->name, printable(kv.key), v.magnitude, kv.offset);
  }
  return v.magnitude;
}

int64_t GgufFile::get_int(std::string_view key) const {
  const GgufKv& kv = require(key);
  if (!is_integer(kv.type)) wrong_type(impl_->name, kv, "an integer");
  IntValue v = load_integer(kv.type, kv.value);
  if (v.negative) return static_cast<int64_t>(0 - v.magnitude);
  if (v.magnitude > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    throw_error("gguf: {}: key '{}': value {} does not fit in int64 (at offset {})", impl_->name,
                printable(kv.key), v.magnitude, kv.offset);
  }
  return static_cast<int64_t>(v.magnitude);
}

double GgufFile::get_float(std::string_view key) const {
  const GgufKv& kv = require(key);
  if (kv.type == GgufValueType::F32) return load<float>(kv.value);
  if (kv.type == GgufValueType::F64) return load<double>(kv.value);
  if (!is_integer(kv.type)) wrong_type(impl_->name, kv, "a number");
  IntValue v = load_integer(kv.type, kv.value);
  double m = static_cast<double>(v.magnitude);
  return v.negative ? -m : m;
}

bool GgufFile::get_bool(std::string_view key) const {
  const GgufKv& kv = require(key);
  if (kv.type != GgufValueType::BOOL) wrong_type(impl_->name, kv, "a bool");
  return *kv.value != 0;
}

std::string GgufFile::get_string_or(std::string_view key, std::string fallback) const {
  return find(key) ? get_string(key) : std::move(fallback);
}
uint64_t GgufFile::get_uint_or(std::string_view key, uint64_t fallback) const {
  return find(key) ? get_uint(key) : fallback;
}
int64_t GgufFile::get_int_or(std::string_view key, int64_t fallback) const {
  return find(key) ? get_int(key) : fallback;
}
double GgufFile::get_float_or(std::string_view key, double fallback) const {
  return find(key) ? get_float(key) : fallback;
}
bool GgufFile::get_bool_or(std::string_view key, bool fallback) const {
  return find(key) ? get_bool(key) : fallback;
}

std::vector<std::string_view> GgufFile::get_string_array(std::string_view key) const {
  const GgufKv& kv = require(key);
  if (kv.type != GgufValueType::ARRAY || kv.array_type != GgufValueType::STRING) {
    wrong_type(impl_->name, kv, "an array of string");
  }
  std::vector<std::string_view> out;
  out.reserve(kv.array_len);
  const uint8_t* p = kv.value;  // every length was checked at open
  for (uint64_t i = 0; i < kv.array_len; ++i) {
    out.push_back(load_string(p));
    p += 8 + out.back().size();
  }
  return out;
}

std::vector<float> GgufFile::get_f32_array(std::string_view key) const {
  const GgufKv& kv = require(key);
  if (kv.type != GgufValueType::ARRAY || kv.array_type != GgufValueType::F32) {
    wrong_type(impl_->name, kv, "an array of f32");
  }
  std::vector<float> out(kv.array_len);  // [array_len]
  if (!out.empty()) std::memcpy(out.data(), kv.value, out.size() * sizeof(float));
  return out;
}

std::vector<int64_t> GgufFile::get_int_array(std::string_view key) const {
  const GgufKv& kv = require(key);
  if (kv.type != GgufValueType::ARRAY || !is_integer(kv.array_type)) {
    wrong_type(impl_->name, kv, "an array of integers");
  }
  uint64_t size = gguf_value_size(kv.array_type);
  std::vector<int64_t> out(kv.array_len);  // [array_len]
  for (uint64_t i = 0; i < kv.array_len; ++i) {
    IntValue v = load_integer(kv.array_type, kv.value + i * size);
    if (v.negative) {
      out[i] = static_cast<int64_t>(0 - v.magnitude);
    } else if (v.magnitude > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      throw_error("gguf: {}: key '{}': element {} = {} does not fit in int64 (at offset {})",
                  impl_->name, printable(kv.key), i, v.magnitude, kv.offset + 12 + i * size);
    } else {
      out[i] = static_cast<int64_t>(v.magnitude);
    }
  }
  return out;
}

}  // namespace channel
