// text_cue.h: running a text through a model on its own (positions from 0, a private KV
// cache) to get what an episode of it would hold: its tokens, their final hidden states and
// the K/V rows of the global layers. A text cue for recall is the centroid of those hidden
// states, encoded exactly as consolidation encodes an episode's centroid.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace channel {

class Model;

struct EncodedText {
  std::vector<int32_t> tokens;  // [n] kept tokens (a leading BOS is run but not kept)
  uint64_t start = 0;           // position of tokens[0]
  std::vector<float> hidden;    // [n][n_embd] final-norm rows (what the LM head reads)
  // [n_global][2][n][n_head_kv * head_dim], keys rotated at their position: the slab order of
  // a store of session_store_geometry() (memory_attachment.h).
  std::vector<float> kv;
};

// Throws channel::Error for unequal K/V head sizes or a text without tokens. Bounded layers
// run as in a plain Session; only the recall layers' K/V is returned.
EncodedText encode_text(const Model& model, std::string_view text, int threads);

// centroid_of(encode_text(...).hidden): the unit query vector of a text cue.
std::vector<float> text_cue(const Model& model, std::string_view text, int threads);

}  // namespace channel
