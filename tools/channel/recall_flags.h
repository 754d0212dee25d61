// The automatic-recall flags that `run`, `stream`, `chat` and `serve` share (--recall-k,
// --no-auto-recall, --recall-method, --recall-neighbours, --recall-lexical,
// --recall-min-ratio, --recall-copy, --recall-velocity, --recall-cooldown), all meaningful
// with --memory, and the AutoRecallConfig they make.
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "memory/auto_recall.h"
#include "memory/recall_copy.h"

namespace channel::cli {

struct RecallFlags {
  int64_t k = 2;
  bool no_auto = false;  // --no-auto-recall: store only
  std::string method = "auto";
  int64_t neighbours = 0;
  double lexical = kDefaultLexicalWeight;
  double min_ratio = kDefaultMinScoreRatio;
  double copy = kDefaultRecallCopyBias;
  float velocity = 0.0f;
  int64_t cooldown = 256;

  // Whether recall fires by itself: not --no-auto-recall and a top-k above 0.
  bool automatic() const { return !no_auto && k > 0; }
};

// Registers the flags on `app`; `k_when` says when --recall-k's episodes are recalled in this
// command ("by the prompt", "at each turn boundary", ...).
void add_recall_options(CLI::App& app, RecallFlags& flags, const std::string& k_when);
// The automatic recall the flags ask for (the method already checked by the parser).
AutoRecallConfig auto_recall_config(const RecallFlags& flags);

}  // namespace channel::cli
