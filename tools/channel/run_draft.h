// `channel run --draft ngram|MODEL`: greedy generation with speculative decoding on a
// contiguous context (runtime/speculative.h), a CPU Session or one on a CUDA device (target
// and draft model alike), streaming text like `run`, then acceptance statistics.
#pragma once

#include <string>

namespace channel::cli {

struct DraftRunArgs {
  std::string model;  // target; empty: the embedded model
  std::string draft;  // "ngram" (prompt lookup) or a GGUF path with the same vocabulary
  int draft_max = 8;  // draft tokens per verify, 1..32
  std::string prompt;
  int n_predict = 256;  // -1: until end of text or a full context
  int n_ctx = 0;        // 0: the model's training context, at most max_ctx
  int max_ctx = 4096;
  int threads = 1;
  bool no_echo = false;
  std::string device = "cpu";  // cpu | cuda[:N]
};

int run_with_draft(const DraftRunArgs& args);

}  // namespace channel::cli
