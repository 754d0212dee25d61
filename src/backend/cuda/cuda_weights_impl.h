// The device-side layout of CudaWeights, shared by the weights upload and the session.
#pragma once

#include <vector>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_session.h"
#include "model/hparams.h"

namespace channel::cuda {

struct DevLayer {
  DevMatrix wq, wk, wv, qkv;  // qkv: the three fused (rows stacked) or type F32 with q == null
  DevMatrix wo;
  DevMatrix gate, up, gate_up;  // gate_up likewise
  DevMatrix down;
  const float* attn_norm = nullptr;
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  const float* post_attn_norm = nullptr;
  const float* ffn_norm = nullptr;
  const float* post_ffw_norm = nullptr;
};

struct WeightsLayout {
  DevMatrix token_embd, output;
  const float* output_norm = nullptr;
  const float* rope_freqs = nullptr;
  std::vector<DevLayer> layers;
};

struct CudaWeights::Impl {
  DeviceInfo info;
  DeviceBuffer memory;  // one allocation holding every tensor
  WeightsLayout w;
};

// Throws a one-line channel::Error for what the CUDA forward cannot run.
// (The bounded layers' shapes: BoundedLayers::device_bytes, cuda_bounded_layers.h.)
void check_model_supported(const ModelHparams& hp);

}  // namespace channel::cuda
