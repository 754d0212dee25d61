// Whether a float array holds only finite values: the forward checks its residual stream and
// its logits after every step (Gemma's logits are 262,144 floats; a compare and a branch a
// value took ~90 us of a step), so this tests 16 values at a time on their exponent bits.
#pragma once

#include <cstdint>

namespace channel {

// True when no x[i] (i < count) is NaN or +-Inf.
bool all_finite(const float* x, int64_t count);

}  // namespace channel
