// Device selection shared by every frontend: `--device cpu|cuda[:N]` and the C API's device
// string. Parsing needs no CUDA; whether this build has the CUDA backend is a constant here.
#pragma once

#include <string>
#include <string_view>

namespace channel {

struct DeviceSpec {
  enum class Kind { cpu, cuda } kind = Kind::cpu;
  int index = 0;  // CUDA device ordinal
  bool is_cuda() const { return kind == Kind::cuda; }
  std::string name() const;  // "cpu", "cuda:0"
};

// "cpu", "cuda" (device 0) or "cuda:N". Throws channel::Error with one line for anything else,
// and for "cuda" in a build without the CUDA backend.
DeviceSpec parse_device(std::string_view text);

// True when this build carries the CUDA backend (it may still find no driver or device).
bool cuda_backend_built();
// The one-line channel::Error for CUDA `device` (named as written) in a build without it.
[[noreturn]] void throw_no_cuda_backend(std::string_view device);

}  // namespace channel
