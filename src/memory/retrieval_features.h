// retrieval_features.h: what a version 2 store keeps per episode for recall in attention
// space (docs/memory-format.md, "Retrieval section"), computed from a staged episode by the
// consolidation worker: R representative keys per KV head of every stored layer, pre-RoPE,
// chosen by the attention they drew from the episode's own queries, and the retrieval head's
// unit vector of every token.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ops/rope.h"
#include "memory/retrieval_head.h"
#include "memory/staging.h"

namespace channel {

struct RetrievalFeatureConfig {
  uint32_t kinds = 0;  // kRetrievalKeys | kRetrievalProj: what the store keeps
  uint32_t num_layers = 0, n_kv_heads = 0, group = 1, head_dim = 0, keys_per_head = 8;
  float attn_scale = 1.0f;
  RopeFreqs rope;                            // the rope the staged keys were rotated with
  std::shared_ptr<const RetrievalHead> head;  // with kRetrievalProj
};

// Representative keys of episode e ([num_layers][n_kv_heads][R][head_dim], pre-RoPE): each
// staged key (rotated at its clock) is un-rotated with f64 angles; its weight is the attention
// it drew inside the episode: softmax_j(q_i . k_j * scale) over j <= i (queries rotated at
// their clocks, so the scores are the model's), averaged over the group's query heads and the
// tokens i >= j that see key j. Without staged queries (e.queries empty) the weight is the key's
// norm. The R heaviest are kept, heaviest first (ties: earlier token); an episode of fewer than R
// tokens repeats them in that order, which leaves every max over the R keys unchanged.
std::vector<float> representative_keys(const RetrievalFeatureConfig& c, const StagedEpisode& e);

// normalize(W_key x_t) for every token of e: [n][head.dim].
std::vector<float> projected_tokens(const RetrievalHead& head, const StagedEpisode& e);

}  // namespace channel
