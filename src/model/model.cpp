#include "model/model.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <initializer_list>

#include "backend/cpu/matmul.h"
#include "backend/cpu/quant_groups.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace channel {

namespace {

std::string shape_string(std::span<const int64_t> ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

// Finds a tensor and checks its shape (GGUF ne order: ne[0] is the input dimension) and
// that Channel can compute with its type.
class TensorBinder {
 public:
  explicit TensorBinder(const GgufFile& gguf) : gguf_(gguf) {}

  const TensorInfo* find(const std::string& name, std::initializer_list<int64_t> shape) const {
    const TensorInfo* t = gguf_.find_tensor(name);
    if (t) check(*t, shape);
    return t;
  }
  const TensorInfo& require(const std::string& name, std::initializer_list<int64_t> shape) const {
    const TensorInfo* t = find(name, shape);
    if (!t)
      throw_error("{}: tensor '{}' is missing (expected shape {})", gguf_.name(), name,
                  shape_string(std::vector<int64_t>(shape)));
    return *t;
  }
  WeightMatrix matrix(const std::string& name, int64_t cols, int64_t rows) const {
    return make_weight_matrix(require(name, {cols, rows}));
  }
  std::vector<float> vector(const std::string& name, int64_t n) const {
    return to_floats(require(name, {n}));
  }
  // The small vectors (norms, rope factors) are copied at load, so their values are checked
  // here: in a quantized model a NaN in a norm would be rounded away by the next product's
  // Q8_0 activation blocks on either device, and the damaged file would run without a word.
  std::vector<float> to_floats(const TensorInfo& t) const {
    const WeightMatrix w = make_weight_matrix(t);
    std::vector<float> out(static_cast<size_t>(t.n_elements()));  // [rows][cols]
    for (int64_t r = 0; r < w.rows; ++r) dequantize_row(w, r, out.data() + r * w.cols);
    for (size_t i = 0; i < out.size(); ++i)
      if (!std::isfinite(out[i]))
        throw_error(
            "{}: tensor '{}' holds a non-finite value (NaN or Inf) at element {}: the "
            "file is damaged",
            gguf_.name(), t.name, i);
    return out;
  }

 private:
  void check(const TensorInfo& t, std::initializer_list<int64_t> shape) const {
    const std::vector<int64_t> want(shape);
    bool ok = t.n_dims <= 4;
    for (int d = 0; d < 4 && ok; ++d) {
      const int64_t expected = d < static_cast<int>(want.size()) ? want[static_cast<size_t>(d)] : 1;
      ok = t.ne[d] == expected;
    }
    if (!ok) {
      const std::vector<int64_t> found(t.ne, t.ne + std::clamp(t.n_dims, 1, 4));
      throw_error("{}: tensor '{}' has shape {}, expected {}", gguf_.name(), t.name,
                  shape_string(found), shape_string(want));
    }
    const auto traits = ggml_type_traits(t.type_id);
    if (!traits)
      throw_error(
          "{}: tensor '{}' has type {}, which Channel does not support "
          "(f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_K .. q6_K)",
          gguf_.name(), t.name, ggml_type_name(t.type_id));
    if (t.ne[0] % traits->block_elems != 0)
      throw_error("{}: tensor '{}' of type {} has a row of {} elements, not a multiple of {}",
                  gguf_.name(), t.name, traits->name, t.ne[0], traits->block_elems);
  }

  const GgufFile& gguf_;
};

ModelWeights bind_weights(const GgufFile& gguf, ModelHparams& hp) {
  const TensorBinder b(gguf);
  ModelWeights w;
  const TensorInfo* embd = gguf.find_tensor("token_embd.weight");
  if (!embd) throw_error("{}: tensor 'token_embd.weight' is missing", gguf.name());
  if (embd->n_dims != 2 || embd->ne[1] < 1 || embd->ne[1] > (1 << 24))
    throw_error(
        "{}: tensor 'token_embd.weight' has shape {}, expected [{}, n_vocab]", gguf.name(),
        shape_string(std::vector<int64_t>(embd->ne, embd->ne + std::clamp(embd->n_dims, 1, 4))),
        hp.n_embd);
  hp.n_vocab = static_cast<int>(embd->ne[1]);

  const int64_t n_embd = hp.n_embd, n_vocab = hp.n_vocab, n_ff = hp.n_ff;
  const int64_t q_dim = static_cast<int64_t>(hp.n_head) * hp.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(hp.n_head_kv) * hp.head_dim;
  const int64_t v_dim = static_cast<int64_t>(hp.n_head_kv) * hp.head_dim_v;
  const int64_t o_dim = static_cast<int64_t>(hp.n_head) * hp.head_dim_v;

  w.token_embd = b.matrix("token_embd.weight", n_embd, n_vocab);
  if (b.find("output.weight", {n_embd, n_vocab})) {
    w.output = b.matrix("output.weight", n_embd, n_vocab);
    w.tied_output = false;
  } else {
    w.output = w.token_embd;
    w.tied_output = true;
  }
  w.output_norm = b.vector("output_norm.weight", n_embd);
  if (const TensorInfo* rf = b.find("rope_freqs.weight", {hp.n_rot / 2}))
    w.rope_freqs = b.to_floats(*rf);

  for (int il = 0; il < hp.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    LayerWeights L;
    L.attn_norm = b.vector(p + "attn_norm.weight", n_embd);
    L.wq = b.matrix(p + "attn_q.weight", n_embd, q_dim);
    L.wk = b.matrix(p + "attn_k.weight", n_embd, kv_dim);
    L.wv = b.matrix(p + "attn_v.weight", n_embd, v_dim);
    L.wo = b.matrix(p + "attn_output.weight", o_dim, n_embd);
    L.ffn_norm = b.vector(p + "ffn_norm.weight", n_embd);
    L.ffn_gate = b.matrix(p + "ffn_gate.weight", n_embd, n_ff);
    L.ffn_up = b.matrix(p + "ffn_up.weight", n_embd, n_ff);
    L.ffn_down = b.matrix(p + "ffn_down.weight", n_ff, n_embd);
    if (hp.has_qk_norm) {
      L.attn_q_norm = b.vector(p + "attn_q_norm.weight", hp.head_dim);
      L.attn_k_norm = b.vector(p + "attn_k_norm.weight", hp.head_dim);
    }
    if (hp.has_post_norms) {
      L.post_attention_norm = b.vector(p + "post_attention_norm.weight", n_embd);
      L.post_ffw_norm = b.vector(p + "post_ffw_norm.weight", n_embd);
    }
    if (hp.arch_id == Arch::bounded)
      L.sinks = load_bounded_sinks(gguf, hp.bounded, il, hp.n_head_kv, hp.head_dim,
                                   L.attn_k_norm.data(), hp.rms_eps);
    w.layers.push_back(std::move(L));
  }
  if (hp.arch_id == Arch::bounded) {
    BoundedRopeCache ropes;  // every bounded layer shares (W, rd, base): one table
    w.bounded_rope = ropes.get(hp.bounded.window, hp.bounded.rope_dims, hp.bounded.rope_base);
    w.bounded_cfg = bounded_layer_cfg(hp.bounded, hp.n_head, hp.n_head_kv, hp.head_dim, hp.rms_eps,
                                      w.bounded_rope.get());
  }
  return w;
}

// Touches every page of the tensor data so the first token does not pay for page faults,
// reporting progress by bytes.
void prefault(const GgufFile& gguf, const LoadProgress& progress) {
  size_t total = 0;
  for (const TensorInfo& t : gguf.tensors()) total += t.n_bytes;
  size_t done = 0;
  volatile uint8_t sink = 0;
  for (const TensorInfo& t : gguf.tensors()) {
    for (size_t off = 0; off < t.n_bytes; off += 4096) sink = sink + t.data[off];
    done += t.n_bytes;
    if (progress && total)
      progress(0.1f + 0.9f * static_cast<float>(done) / static_cast<float>(total));
  }
}

}  // namespace

Model::Model(GgufFile gguf, const LoadProgress& progress) : gguf_(std::move(gguf)) {
  if (progress) progress(0.0f);
  hparams_ = read_hparams(gguf_);
  weights_ = bind_weights(gguf_, hparams_);
  tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::from_gguf(gguf_));
  if (tokenizer_->n_vocab() != hparams_.n_vocab)
    throw_error("{}: the tokenizer has {} tokens but token_embd.weight has {} rows", gguf_.name(),
                tokenizer_->n_vocab(), hparams_.n_vocab);
  for (const TensorInfo& t : gguf_.tensors()) weight_bytes_ += t.n_bytes;
  if (progress) progress(0.1f);
  prefault(gguf_, progress);
  make_quant_groups();
  if (progress) progress(1.0f);
}

void Model::FreeBytes::operator()(uint8_t* p) const {
  std::free(p);
}

// The Q4_0 and Q5_0 matrices the products read (every layer's, and the output's), regrouped
// once for the CPU's kernels where they read groups (quant_groups.h). From a file mapping the
// original bytes are then dropped from memory (MADV_DONTNEED: clean file pages, read back only
// if another backend, the CUDA upload, reads them), so the model does not hold them twice.
void Model::make_quant_groups() {
  std::vector<WeightMatrix*> mats;
  for (LayerWeights& L : weights_.layers)
    for (WeightMatrix* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.ffn_gate, &L.ffn_up, &L.ffn_down})
      mats.push_back(m);
  mats.push_back(&weights_.output);
  for (WeightMatrix* m : mats) {
    if (!cpu::quant_groups_used(m->type) || m->data == nullptr || m->rows <= 0) continue;
    const size_t bytes = cpu::quant_groups_bytes(m->type, m->rows, m->cols);
    auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
    if (!p)
      throw_error("{}: out of memory regrouping {} weights ({} bytes)", gguf_.name(),
                  ggml_type_name(static_cast<uint32_t>(m->type)), bytes);
    groups_.emplace_back(p);
    cpu::pack_quant_groups(m->type, m->data, m->row_bytes, m->rows, m->cols, p);
    m->groups = p;
    // A tied output is the embedding table too: its rows then come from the groups as well.
    if (m == &weights_.output && weights_.tied_output) weights_.token_embd.groups = p;
    if (gguf_.mapped()) {
      const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
      const auto begin = (reinterpret_cast<uintptr_t>(m->data) + page - 1) / page * page;
      const auto end =
          (reinterpret_cast<uintptr_t>(m->data) + m->row_bytes * static_cast<size_t>(m->rows)) /
          page * page;
      if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
    }
  }
}

Model::~Model() = default;

std::shared_ptr<const Model> Model::load(const std::string& path, const LoadProgress& progress) {
  return std::shared_ptr<const Model>(new Model(GgufFile::open(path), progress));
}

std::shared_ptr<const Model> Model::load_from_memory(std::span<const unsigned char> bytes,
                                                     std::string name,
                                                     const LoadProgress& progress) {
  return std::shared_ptr<const Model>(
      new Model(GgufFile::from_memory(bytes.data(), bytes.size(), std::move(name)), progress));
}

}  // namespace channel
