// libFuzzer target for the GGUF reader: parse any bytes with GgufFile::from_memory and
// touch every accessor. Only channel::Error may escape the parser; anything else (a crash,
// a sanitizer report, another exception) is a bug.
#include <cstddef>
#include <cstdint>

#include "gguf/gguf_reader.h"
#include "util/error.h"

namespace {

template <typename F>
void quietly(F&& f) {
  try {
    f();
  } catch (const channel::Error&) {
  }
}

volatile uint64_t g_sink;  // keeps the reads of values and tensor bytes from being elided

void touch(const channel::GgufFile& f) {
  uint64_t h = f.version() + f.alignment() + f.file_size() + f.data_offset();
  for (const channel::GgufKv& kv : f.kvs()) {
    const std::string& k = kv.key;
    h += f.find(k) == &kv;
    quietly([&] { h += f.get_string(k).size(); });
    quietly([&] { h += f.get_uint(k); });
    quietly([&] { h += static_cast<uint64_t>(f.get_int(k)); });
    quietly([&] { h += static_cast<uint64_t>(f.get_float(k) != 0.0); });
    quietly([&] { h += f.get_bool(k); });
    quietly([&] { h += f.get_string_or(k, "").size(); });
    quietly([&] { h += f.get_uint_or(k, 1); });
    quietly([&] { h += static_cast<uint64_t>(f.get_int_or(k, 1)); });
    quietly([&] { h += static_cast<uint64_t>(f.get_float_or(k, 1.0) != 0.0); });
    quietly([&] { h += f.get_bool_or(k, true); });
    quietly([&] {
      for (std::string_view s : f.get_string_array(k)) h += s.size() + (s.empty() ? 0 : s[0]);
    });
    quietly([&] {
      for (float x : f.get_f32_array(k)) h += x != 0.0f;
    });
    quietly([&] {
      for (int64_t x : f.get_int_array(k)) h += static_cast<uint64_t>(x);
    });
  }
  quietly([&] { f.get_uint("no.such.key"); });
  h += f.get_uint_or("no.such.key", 3);
  for (const channel::TensorInfo& t : f.tensors()) {
    h += f.find_tensor(t.name) == &t;
    h += static_cast<uint64_t>(t.n_elements()) + t.type_id + static_cast<uint64_t>(t.n_dims);
    for (size_t i = 0; i < t.n_bytes; ++i) h += t.data[i];
    quietly([&] { h += static_cast<uint64_t>(f.tensor_traits(t).block_bytes); });
  }
  g_sink = h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    channel::GgufFile f = channel::GgufFile::from_memory(data, size, "fuzz.gguf");
    touch(f);
  } catch (const channel::Error&) {
  }
  return 0;
}
