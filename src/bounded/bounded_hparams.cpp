// read_bounded_hparams / load_bounded_sinks: header and sink-tensor checks for `bounded`.
#include "bounded/bounded_hparams.h"

#include <cmath>
#include <cstring>

#include "gguf/gguf_reader.h"
#include "util/error.h"

namespace channel {

namespace {

// An unsigned key within [lo, hi], as an int.
int read_ranged(const GgufFile& f, const char* key, uint64_t lo, uint64_t hi, const char* what) {
  const uint64_t v = f.get_uint(key);
  if (v < lo || v > hi) {
    throw_error("{}: {} = {}: {} must be in [{}, {}]", f.name(), key, v, what, lo, hi);
  }
  return static_cast<int>(v);
}

// Same scalar RMS norm as the model's q/k norms: sum of squares in double, scale in float.
void rms_norm_row(const float* x, const float* w, int n, float eps, float* y) {
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum / n) + eps);
  for (int i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
}

std::vector<float> read_sink(const GgufFile& f, const std::string& name, int S, int kvh, int hd) {
  const TensorInfo* t = f.find_tensor(name);
  if (t == nullptr) throw_error("{}: bounded layer lacks tensor '{}'", f.name(), name);
  if (t->type_id != static_cast<uint32_t>(GgmlType::F32)) {
    throw_error("{}: tensor '{}' has type {}, expected f32", f.name(), name,
                ggml_type_name(t->type_id));
  }
  if (t->n_dims > 3 || t->ne[0] != hd || t->ne[1] != S || t->ne[2] != kvh || t->ne[3] != 1) {
    throw_error(
        "{}: tensor '{}' has shape [{}, {}, {}, {}], expected [head_dim {}, "
        "sink_count {}, head_count_kv {}]",
        f.name(), name, t->ne[0], t->ne[1], t->ne[2], t->ne[3], hd, S, kvh);
  }
  std::vector<float> out(static_cast<size_t>(kvh) * S * hd);  // [kvh][S][hd]
  if (!out.empty()) std::memcpy(out.data(), t->data, out.size() * sizeof(float));
  return out;
}

}  // namespace

std::string bounded_sink_k_name(int layer) {
  return fmt::format("blk.{}.attn_sink_k.weight", layer);
}
std::string bounded_sink_v_name(int layer) {
  return fmt::format("blk.{}.attn_sink_v.weight", layer);
}

BoundedHparams read_bounded_hparams(const GgufFile& f, int n_layer, int n_heads, int n_kv_heads,
                                    int head_dim, int head_dim_v) {
  BoundedHparams hp;
  if (head_dim_v != head_dim) {
    throw_error("{}: bounded.attention.value_length = {} must equal key_length = {}", f.name(),
                head_dim_v, head_dim);
  }
  hp.window = read_ranged(f, "bounded.attention.window", 1, BOUNDED_MAX_WINDOW, "window W");
  hp.n_sinks = read_ranged(f, "bounded.attention.sink_count", 0, BOUNDED_MAX_SINKS, "sink count S");
  const uint64_t rd = f.get_uint_or("bounded.rope.dimension_count", head_dim);
  if (rd > static_cast<uint64_t>(head_dim) || rd % 2 != 0) {
    throw_error(
        "{}: bounded.rope.dimension_count = {}: rd must be even and at most head_dim "
        "= {}",
        f.name(), rd, head_dim);
  }
  hp.rope_dims = static_cast<int>(rd);
  hp.rope_base = f.get_float_or("bounded.rope.freq_base", 10000.0);
  if (!(hp.rope_base > 1.0) || !std::isfinite(hp.rope_base)) {
    throw_error("{}: bounded.rope.freq_base = {} must be a finite number above 1", f.name(),
                hp.rope_base);
  }
  hp.sink_key_norm = f.get_bool_or("bounded.attention.sink_key_norm", false);
  const std::vector<int64_t> types = f.get_int_array("bounded.attention.layer_types");
  if (types.size() != static_cast<size_t>(n_layer)) {
    throw_error("{}: bounded.attention.layer_types has {} entries, block_count is {}", f.name(),
                types.size(), n_layer);
  }
  for (size_t i = 0; i < types.size(); ++i) {
    if (types[i] != 0 && types[i] != 1) {
      throw_error(
          "{}: bounded.attention.layer_types[{}] = {}: expected 0 (bounded) or 1 "
          "(global)",
          f.name(), i, types[i]);
    }
    hp.layer_types.push_back(static_cast<BoundedLayerType>(types[i]));
  }
  if (n_heads <= 0 || n_kv_heads <= 0 || n_heads % n_kv_heads != 0) {
    throw_error("{}: bounded: head_count {} is not a positive multiple of head_count_kv {}",
                f.name(), n_heads, n_kv_heads);
  }
  return hp;
}

BoundedAttnCfg bounded_layer_cfg(const BoundedHparams& hp, int n_heads, int n_kv_heads,
                                 int head_dim, float norm_eps, const BoundedRope* rope) {
  BoundedAttnCfg c;
  c.n_heads = n_heads;
  c.n_kv_heads = n_kv_heads;
  c.head_dim = head_dim;
  c.rope_dims = hp.rope_dims;
  c.window = hp.window;
  c.n_sinks = hp.n_sinks;
  c.attn_scale = head_dim > 0 ? 1.0f / std::sqrt(static_cast<float>(head_dim)) : 0.0f;
  c.norm_eps = norm_eps;
  c.sink_k_norm = hp.sink_key_norm;
  c.rope = rope;
  validate_bounded_cfg(c, "bounded layer");
  return c;
}

BoundedSinks load_bounded_sinks(const GgufFile& f, const BoundedHparams& hp, int layer,
                                int n_kv_heads, int head_dim, const float* k_norm, float norm_eps) {
  const std::string kname = bounded_sink_k_name(layer), vname = bounded_sink_v_name(layer);
  BoundedSinks sinks;
  if (!hp.is_bounded(layer)) {
    for (const std::string& name : {kname, vname}) {
      if (f.find_tensor(name) != nullptr) {
        throw_error("{}: tensor '{}' present, but layer {} is global (layer_types = 1)", f.name(),
                    name, layer);
      }
    }
    return sinks;
  }
  if (hp.n_sinks == 0 && f.find_tensor(kname) == nullptr && f.find_tensor(vname) == nullptr) {
    return sinks;  // S = 0: a file may omit the (empty) sink tensors
  }
  sinks.k = read_sink(f, kname, hp.n_sinks, n_kv_heads, head_dim);
  sinks.v = read_sink(f, vname, hp.n_sinks, n_kv_heads, head_dim);
  if (hp.sink_key_norm) {
    for (size_t r = 0; r < sinks.k.size(); r += head_dim) {
      rms_norm_row(sinks.k.data() + r, k_norm, head_dim, norm_eps, sinks.k.data() + r);
    }
  }
  return sinks;
}

}  // namespace channel
