// The optional retrieval head of a GGUF file (metadata, not tensors).
#include "memory/retrieval_head.h"

#include <cmath>

#include "gguf/gguf_reader.h"
#include "memory/episodic_format.h"
#include "util/error.h"

namespace channel {

namespace {

void project(const std::vector<float>& w, uint32_t dim, size_t n_embd, const float* x,
             float* out) {
  double n2 = 0.0;
  for (uint32_t r = 0; r < dim; ++r) {
    const float* row = w.data() + size_t{r} * n_embd;
    double s = 0.0;
    for (size_t i = 0; i < n_embd; ++i) s += double{row[i]} * x[i];
    out[r] = static_cast<float>(s);
    n2 += s * s;
  }
  const double inv = n2 > 0.0 ? 1.0 / std::sqrt(n2) : 0.0;
  for (uint32_t r = 0; r < dim; ++r) out[r] = static_cast<float>(out[r] * inv);
}

}  // namespace

void RetrievalHead::project_query(const float* x, float* out) const {
  project(query, dim, n_embd, x, out);
}
void RetrievalHead::project_key(const float* x, float* out) const {
  project(key, dim, n_embd, x, out);
}

std::optional<RetrievalHead> load_retrieval_head(const GgufFile& gguf, size_t n_embd) {
  if (gguf.find("channel.retrieval.dim") == nullptr) return std::nullopt;
  RetrievalHead h;
  const uint64_t dim = gguf.get_uint("channel.retrieval.dim");
  if (dim == 0 || dim > kMaxProjDim)
    throw_error("gguf: {}: key 'channel.retrieval.dim': {} is outside 1..{}", gguf.name(), dim,
                kMaxProjDim);
  h.dim = static_cast<uint32_t>(dim);
  h.n_embd = n_embd;
  for (const char* key : {"channel.retrieval.query", "channel.retrieval.key"}) {
    std::vector<float> w = gguf.get_f32_array(key);
    if (w.size() != dim * n_embd)
      throw_error("gguf: {}: key '{}': {} values, expected {} x {} (dim x n_embd)", gguf.name(),
                  key, w.size(), dim, n_embd);
    for (float v : w)
      if (!std::isfinite(v))
        throw_error("gguf: {}: key '{}': holds a value that is not finite", gguf.name(), key);
    (std::string_view(key).ends_with("query") ? h.query : h.key) = std::move(w);
  }
  return h;
}

}  // namespace channel
