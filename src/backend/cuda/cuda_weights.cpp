// CudaWeights: the model's matrices and norm vectors in device memory, uploaded once.
#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_bounded_layers.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_session.h"
#include "backend/cuda/cuda_weights_impl.h"
#include "util/error.h"

namespace channel::cuda {

namespace {

constexpr size_t kAlign = 256;
size_t aligned(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

std::string type_name(GgmlType t) { return ggml_type_name(static_cast<uint32_t>(t)); }

// A bump allocator over one device allocation: first a sizing pass, then the real one.
struct Carver {
  char* base = nullptr;
  size_t used = 0;
  void* take(size_t bytes) {
    void* p = base ? base + used : nullptr;
    used += aligned(bytes);
    return p;
  }
};

struct Uploader {
  Carver& carve;
  cudaStream_t stream;
  DeviceBuffer* staging;  // null in the sizing pass

  // Matrices that share an input; fused into one when their types and widths agree.
  std::vector<DevMatrix> group(std::initializer_list<const WeightMatrix*> ws, DevMatrix* fused,
                               const char* what) {
    std::vector<DevMatrix> out;
    const WeightMatrix& w0 = **ws.begin();
    bool same = true;
    int64_t rows = 0;
    for (const WeightMatrix* w : ws) {
      same = same && w->type == w0.type && w->cols == w0.cols;
      rows += w->rows;
    }
    if (same) {
      void* q = carve.take(repacked_q_bytes(w0.type, rows, w0.cols));
      void* d = carve.take(repacked_d_bytes(w0.type, rows, w0.cols));
      int64_t row0 = 0;
      for (const WeightMatrix* w : ws) {
        out.push_back(place(*w, offset(q, repacked_q_bytes(w->type, row0, w->cols)),
                            offset(d, repacked_d_bytes(w->type, row0, w->cols)), what));
        row0 += w->rows;
      }
      if (fused) *fused = DevMatrix{w0.type, rows, w0.cols, q, d};
    } else {
      for (const WeightMatrix* w : ws) out.push_back(single(*w, what));
      if (fused) *fused = DevMatrix{};
    }
    return out;
  }

  DevMatrix single(const WeightMatrix& w, const char* what) {
    void* q = carve.take(repacked_q_bytes(w.type, w.rows, w.cols));
    void* d = carve.take(repacked_d_bytes(w.type, w.rows, w.cols));
    return place(w, q, d, what);
  }

  static void* offset(void* p, size_t bytes) {
    return p ? static_cast<char*>(p) + bytes : nullptr;
  }

  DevMatrix place(const WeightMatrix& w, void* q, void* d, const char* what) {
    if (!type_supported(w.type))
      throw_error(
          "cuda: {} has type {}, which the CUDA backend does not compute with (f32, f16, "
          "bf16, q8_0, q4_0, q4_1, q5_0, q5_1 and q2_K..q6_K are)",
          what, type_name(w.type));
    DevMatrix m{w.type, w.rows, w.cols, q, d};
    if (!staging) return m;
    const size_t raw = w.row_bytes * static_cast<size_t>(w.rows);
    const bool plain = repacked_d_bytes(w.type, w.rows, w.cols) == 0;
    check(cudaMemcpyAsync(plain ? q : staging->get(), w.data, raw, cudaMemcpyHostToDevice, stream),
          "uploading a weight");
    if (!plain) repack_weight(w.type, staging->get(), w.rows, w.cols, q, d, stream);
    check(cudaStreamSynchronize(stream), "uploading a weight");
    return m;
  }

  const float* vec(const std::vector<float>& v) {
    if (v.empty()) return nullptr;
    void* p = carve.take(v.size() * sizeof(float));
    if (staging)
      check(cudaMemcpyAsync(p, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice, stream),
            "uploading a norm");
    return static_cast<const float*>(p);
  }
};

void layout(const Model& model, Uploader& up, WeightsLayout& out) {
  const ModelWeights& w = model.weights();
  const ModelHparams& hp = model.hparams();
  out.token_embd = up.single(w.token_embd, "token_embd.weight");
  out.output = w.tied_output ? out.token_embd : up.single(w.output, "output.weight");
  out.output.role = MatRole::output;
  out.output_norm = up.vec(w.output_norm);
  out.rope_freqs = up.vec(w.rope_freqs);
  out.layers.resize(static_cast<size_t>(hp.n_layer));
  for (int il = 0; il < hp.n_layer; ++il) {
    const LayerWeights& L = w.layers[static_cast<size_t>(il)];
    DevLayer& D = out.layers[static_cast<size_t>(il)];
    const std::vector<DevMatrix> qkv = up.group({&L.wq, &L.wk, &L.wv}, &D.qkv, "an attention weight");
    D.wq = qkv[0];
    D.wk = qkv[1];
    D.wv = qkv[2];
    D.wo = up.single(L.wo, "attn_output.weight");
    const std::vector<DevMatrix> gu = up.group({&L.ffn_gate, &L.ffn_up}, &D.gate_up, "a feed-forward weight");
    D.gate = gu[0];
    D.up = gu[1];
    D.down = up.single(L.ffn_down, "ffn_down.weight");
    for (DevMatrix* m : {&D.wq, &D.wk, &D.wv, &D.qkv}) m->role = MatRole::qkv;
    D.wo.role = MatRole::wo;
    for (DevMatrix* m : {&D.gate, &D.up, &D.gate_up}) m->role = MatRole::gate_up;
    D.down.role = MatRole::down;
    D.attn_norm = up.vec(L.attn_norm);
    D.q_norm = up.vec(L.attn_q_norm);
    D.k_norm = up.vec(L.attn_k_norm);
    D.post_attn_norm = up.vec(L.post_attention_norm);
    D.ffn_norm = up.vec(L.ffn_norm);
    D.post_ffw_norm = up.vec(L.post_ffw_norm);
  }
}

size_t largest_raw(const Model& model) {
  size_t m = 0;
  auto see = [&](const WeightMatrix& w) { m = std::max(m, w.row_bytes * static_cast<size_t>(w.rows)); };
  const ModelWeights& w = model.weights();
  see(w.token_embd);
  see(w.output);
  for (const LayerWeights& L : w.layers)
    for (const WeightMatrix* x : {&L.wq, &L.wk, &L.wv, &L.wo, &L.ffn_gate, &L.ffn_up, &L.ffn_down})
      see(*x);
  return m;
}

}  // namespace

void check_model_supported(const ModelHparams& hp) {
  const int group = hp.n_head / hp.n_head_kv;
  if (!attention_shape_supported(hp.head_dim, hp.head_dim_v, group))
    throw_error(
        "cuda: head_dim {} / {} with {} query heads per KV head is not supported by the "
        "CUDA attention (head_dim a multiple of 32 up to 256, at most 8 heads per KV head)",
        hp.head_dim, hp.head_dim_v, group);
  if (hp.n_rot > hp.head_dim || hp.n_rot % 2 != 0)
    throw_error("cuda: rope dimension count {} does not fit head_dim {}", hp.n_rot, hp.head_dim);
  if (hp.n_embd > row_kernels_max_row())
    throw_error("cuda: hidden size {} is larger than the CUDA norm kernels take ({})", hp.n_embd,
                row_kernels_max_row());
}

CudaWeights::CudaWeights(std::shared_ptr<const Model> model, int device)
    : model_(std::move(model)), impl_(std::make_unique<Impl>()) {
  check_model_supported(model_->hparams());
  BoundedLayers::device_bytes(*model_);  // the bounded layers' shapes (none: 0)
  impl_->info = select_device(device);
  Carver sizing;
  Uploader dry{sizing, nullptr, nullptr};
  WeightsLayout unused;
  layout(*model_, dry, unused);  // validates every type before any allocation
  const size_t staging_bytes = largest_raw(*model_);
  require_device_memory(impl_->info, sizing.used + staging_bytes,
                        fmt::format("the model's weights ({} tensors)", model_->gguf().tensors().size()));
  impl_->memory = DeviceBuffer(sizing.used, "the model's weights");
  DeviceBuffer staging(staging_bytes, "the weight upload's staging buffer");
  Stream stream;
  Carver real{impl_->memory.as<char>(), 0};
  Uploader up{real, stream.get(), &staging};
  layout(*model_, up, impl_->w);
  stream.sync("uploading the weights");
}

CudaWeights::~CudaWeights() = default;

std::shared_ptr<const CudaWeights> CudaWeights::upload(std::shared_ptr<const Model> model,
                                                       int device) {
  return std::shared_ptr<const CudaWeights>(new CudaWeights(std::move(model), device));
}

const DeviceInfo& CudaWeights::device() const { return impl_->info; }
std::string CudaWeights::device_name() const { return impl_->info.name; }
size_t CudaWeights::device_bytes() const { return impl_->memory.bytes(); }

}  // namespace channel::cuda
