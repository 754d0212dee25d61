#include "embedded_model.h"

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
