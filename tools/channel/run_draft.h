// `channel run --draft ngram|MODEL`: greedy generation with speculative decoding, streaming
// text like `run`, then acceptance statistics. With --ctx on a contiguous context
// (runtime/speculative.h: a CPU Session or one on a CUDA device, target and draft model
// alike, run_with_draft); otherwise on the slot ring like `run` (cmd_run.cpp,
// runtime/stream_speculative.h), with the drafter made here.
#pragma once

#include <memory>
#include <string>

#include "backend/device.h"
#include "cli_common.h"
#include "runtime/speculative.h"

namespace channel::cli {

// The drafter --draft names: prompt lookup ("ngram"), or a GGUF model with the target's
// vocabulary, loaded into *draft_model, in a contiguous context of n_ctx tokens on `device`
// (0: its training context, at most 4,096).
std::unique_ptr<Drafter> make_drafter(const std::string& draft, const Model& target,
                                      const DeviceSpec& device, int n_ctx, int threads,
                                      LoadedModel* draft_model);

// The statistics line after a speculative run.
void print_draft_stats(const std::string& draft, int draft_max, const SpeculativeStats& stats);

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
