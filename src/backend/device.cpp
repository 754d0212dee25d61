#include "backend/device.h"

#include <charconv>

#include "util/error.h"

namespace channel {

std::string DeviceSpec::name() const {
  return kind == Kind::cpu ? std::string("cpu") : "cuda:" + std::to_string(index);
}

void throw_no_cuda_backend(std::string_view device) {
  throw_error(
      "'{}': this build of channel has no CUDA backend (configure with -DCHANNEL_CUDA=ON where "
      "nvcc is installed)",
      device);
}

bool cuda_backend_built() {
#if defined(CHANNEL_HAS_CUDA)
  return true;
#else
  return false;
#endif
}

DeviceSpec parse_device(std::string_view text) {
  DeviceSpec spec;
  if (text == "cpu") return spec;
  if (text.substr(0, 4) != "cuda" || (text.size() > 4 && text[4] != ':'))
    throw_error("'{}' is not a device (allowed: cpu, cuda, cuda:N)", text);
  spec.kind = DeviceSpec::Kind::cuda;
  if (text.size() > 4) {
    const std::string_view digits = text.substr(5);
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), spec.index);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() ||
        spec.index < 0)
      throw_error("'{}': N in cuda:N must be a device number 0, 1, ...", text);
  }
  if (!cuda_backend_built()) throw_no_cuda_backend(text);
  return spec;
}

}  // namespace channel
