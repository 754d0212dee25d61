// The default model compiled into the `channel` binary (models/channel-bounded.gguf
// at build time). Empty when the tree had no default model when it was built.
#pragma once

#include <span>

namespace channel::cli {

std::span<const unsigned char> embedded_model();

}  // namespace channel::cli
