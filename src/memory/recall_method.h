// recall_method.h: how a cue is scored against the stored episodes (docs/memory-format.md,
// "Recall methods"): the seed's centroid cosine, the model's queries against each episode's
// representative keys, a trained retrieval projection, or a mix of the first two.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace channel {

enum class RecallMethod : uint8_t {
  automatic,  // proj when the model has a retrieval head and the store its vectors, else keys
              // when the store has them, else centroid
  centroid,   // cosine of the unit mean final hidden state (spec 003)
  keys,       // sum over global layers and query heads of max over R keys of q.k * scale
  proj,       // max over the episode's tokens of normalize(W_q x_cue) . normalize(W_k x_t)
  hybrid,     // z(centroid) + z(keys), each z-normalised over the live episodes scored
};

const char* recall_method_name(RecallMethod m);
// "auto", "centroid", "keys", "proj", "hybrid"; nullopt for anything else.
std::optional<RecallMethod> parse_recall_method(std::string_view s);

}  // namespace channel
