// The bounded (swa_sink_v1) layers of a model on the device, for the slot ring (cuda_ring.cpp)
// and the contiguous session (cuda_session.cpp): each bounded layer's ring of the last W keys
// and values (f32, [n_head_kv][W][head_dim]), its S sinks and the shared rotation table
// (BoundedRope, [W][rd/2] cos and sin), allocated and uploaded once; per chunk the layer's
// kernels (cuda_bounded.cu) and the chunk's normed keys and values back to page-locked memory,
// for the session's host BoundedState, which stays the source of truth (undo history,
// snapshots, session files) and is loaded back into the device ring when it changes.
// Internal to the backend (needs the CUDA runtime headers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_weights_impl.h"
#include "bounded/bounded_state.h"

namespace channel::cuda {

class BoundedLayers {
 public:
  // Device bytes the bounded layers of a model take (0 for other architectures); a one-line
  // channel::Error when their shape is one the kernels do not take.
  static size_t device_bytes(const Model& model);

  BoundedLayers() = default;
  // Allocates the rings (empty), uploads the sinks and the rotation table; chunks of at most
  // max_batch tokens. Nothing for a model without bounded layers.
  BoundedLayers(const CudaWeights& weights, int max_batch);

  int count() const { return n_bounded_; }
  int index(int il) const { return index_[static_cast<size_t>(il)]; }  // -1: not bounded
  size_t bytes() const { return rings_.bytes(); }  // the rings

  // Replaces layer il's device ring with the host's state, in order on cs (the host's vectors
  // may change once it returns: pageable copies are staged).
  void load(int il, const BoundedState& state, cudaStream_t cs);

  // Enqueues bounded layer il's attention of the n tokens of qkv ([n][ld] = q | k | v, the
  // q/k heads normed here in place) into out [n][n_head][head_dim], the insertion of the
  // chunk's keys and values into the device ring, and their copy back (chunk_kv). seen:
  // device, the positions the layer held before the chunk.
  void enqueue(int il, const DevLayer& L, float* qkv, int64_t ld, int n, const int64_t* seen,
               float* out, cudaStream_t cs);

  // After the stream has synchronised: the chunk's keys and values of bounded layer b (index)
  // of a chunk of n tokens, [n][2][n_head_kv * head_dim] (k then v of each token).
  const float* chunk_kv(int b, int n) const;

 private:
  const CudaWeights* w_ = nullptr;
  std::vector<int> index_;  // [n_layer] position among bounded layers, -1 for others
  int n_bounded_ = 0;
  int64_t q_dim_ = 0, kv_dim_ = 0;
  // rings [n_bounded][2][n_head_kv][W][head_dim], sinks [n_bounded][2][n_head_kv][S][head_dim],
  // table [2][W][rd/2], the chunk's keys and values coming back [n_bounded][B][2][kv_dim].
  DeviceBuffer rings_, sinks_, rope_table_;
  PinnedBuffer chunk_kv_;
};

}  // namespace channel::cuda
