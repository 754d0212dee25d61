#include "embedded_model.h"

#include "capi/capi_error.h"
#include "channel.h"

#ifdef CHANNEL_HAS_EMBEDDED_MODEL
extern "C" const unsigned char channel_embedded_model_begin[];
extern "C" const unsigned char channel_embedded_model_end[];
#endif

namespace channel::cli {

std::span<const unsigned char> embedded_model() {
#ifdef CHANNEL_HAS_EMBEDDED_MODEL
  return {channel_embedded_model_begin, channel_embedded_model_end};
#else
  return {};
#endif
}

}  // namespace channel::cli

// The C API's default model lives here, with the bytes it loads (include/channel.h).
extern "C" channel_status channel_model_load_default(channel_model** out) {
  return channel_model_load_default_ex(nullptr, out);
}

extern "C" channel_status channel_model_load_default_ex(const channel_model_load_params* params,
                                                        channel_model** out) {
  const std::span<const unsigned char> bytes = channel::cli::embedded_model();
  if (bytes.empty()) {
    channel::capi::set_last_error("no default model is built into this program; load a file");
    return CHANNEL_ERR_UNAVAILABLE;
  }
  return channel_model_load_memory_ex(bytes.data(), bytes.size(), "(built-in model)", params, out);
}
