// retrieval_head.h: an optional trained retrieval projection a GGUF carries as metadata
// (docs/memory-format.md, "Retrieval head"): channel.retrieval.dim (u32 d_r), channel.retrieval.query
// and channel.retrieval.key (f32 arrays of d_r x n_embd, row-major [d_r][n_embd]). Its input
// x is the final hidden state after the output norm (what the LM head reads). An episode keeps
// normalize(W_key x_t) for every token t; a cue is normalize(W_query x_last).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace channel {

class GgufFile;

struct RetrievalHead {
  uint32_t dim = 0;             // d_r
  size_t n_embd = 0;
  std::vector<float> query;     // [dim][n_embd]
  std::vector<float> key;       // [dim][n_embd]

  // out[dim] = W x / ||W x|| (zeros when W x is zero); x is [n_embd].
  void project_query(const float* x, float* out) const;
  void project_key(const float* x, float* out) const;
};

// The head of `gguf`, or nullopt when the file has no channel.retrieval.dim. Throws
// channel::Error (one line, naming the key) for a malformed head: a dim outside 1..4096, a
// missing array, an array of the wrong length or with a non-finite value.
std::optional<RetrievalHead> load_retrieval_head(const GgufFile& gguf, size_t n_embd);

}  // namespace channel
