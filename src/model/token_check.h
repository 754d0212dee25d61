// The one check of a token list against a model's vocabulary, shared by every session (the
// contiguous context, the slot ring, the CUDA session) and the C API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "util/error.h"

namespace channel {

// Throws channel::Error for an empty list ("no tokens given") or an id outside [0, n_vocab)
// ("token id 300 at index 1 is outside the vocabulary (n_vocab 300)").
inline void check_token_ids(std::span<const int32_t> tokens, int32_t n_vocab) {
  if (tokens.empty()) throw_error("no tokens given");
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= n_vocab)
      throw_error("token id {} at index {} is outside the vocabulary (n_vocab {})", tokens[i], i,
                  n_vocab);
}

}  // namespace channel
