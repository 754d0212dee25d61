// quantize_model.h: converts an f32/f16/bf16 GGUF to a llama.cpp file type (the work of
// `channel quantize`): metadata is copied (general.file_type updated), 1-D tensors and
// anything that is not a 2-D weight are copied as they are, and each 2-D weight is
// converted to the type QuantMixPlanner picks for it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "model/quant_mix.h"

namespace channel {

class GgufFile;
class GgufWriter;
class ThreadPool;

struct QuantizeReport {
  int n_quantized = 0, n_copied = 0;
  size_t bytes_in = 0, bytes_out = 0;
};

// Throws channel::Error naming the tensor for input it cannot convert (a 2-D weight that is
// already quantized). `on_tensor` (optional) hears each tensor's name and chosen type.
QuantizeReport quantize_model(
    const GgufFile& in, const QuantMix& mix, GgufWriter& out, ThreadPool& pool,
    const std::function<void(const std::string&, GgmlType)>& on_tensor = {});

}  // namespace channel
