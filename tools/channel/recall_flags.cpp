// The shared automatic-recall flags (recall_flags.h).
#include "recall_flags.h"

#include "cli_common.h"
#include "memory/recall_method.h"

namespace channel::cli {

void add_recall_options(CLI::App& app, RecallFlags& f, const std::string& k_when) {
  app.add_option("--recall-k", f.k,
                 "With --memory: episodes recalled " + k_when + " (the top-k; 0: none)")
      ->check(integer_in(0, 1 << 20))
      ->capture_default_str();
  app.add_flag("--no-auto-recall", f.no_auto,
               "With --memory: never recall by itself (episodes are still stored)");
  app.add_option("--recall-method", f.method,
                 "With --memory: how episodes are scored (auto: proj with a retrieval head, "
                 "else keys, else centroid)")
      ->check(CLI::IsMember({"auto", "centroid", "keys", "proj", "hybrid"}))
      ->capture_default_str();
  app.add_option("--recall-neighbours", f.neighbours,
                 "With --memory: temporal neighbours (parent, child) recalled beside each hit "
                 "when tier 3 has room")
      ->check(integer_in(0, 64))
      ->capture_default_str();
  app.add_option("--recall-lexical", f.lexical,
                 "With --memory: weight of the lexical half of recall (names and rare words "
                 "the cue shares with an episode), in standard deviations of the method's "
                 "scores; 0: the model's vectors alone")
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str();
  app.add_option("--recall-min-ratio", f.min_ratio,
                 "With --memory: a hit after the best goes into tier 3 only when it scores at "
                 "least this share of the best (a weak match beside a strong one is a "
                 "distractor); 0: the whole top-k")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--recall-copy", f.copy,
                 "With --memory: logit bonus of the token that continues, in a recalled "
                 "episode, the run the newest tokens repeat (a name copied whole); 0: off")
      ->check(CLI::Range(0.0, 20.0))
      ->capture_default_str();
  app.add_option("--recall-velocity", f.velocity,
                 "With --memory: also recall, in the background, when the hidden state moves "
                 "by more than this times its running mean (condition C; 0: off)")
      ->check(CLI::Range(0.0f, 1e6f))
      ->capture_default_str();
  app.add_option("--recall-cooldown", f.cooldown,
                 "With --recall-velocity: tokens between two such recalls")
      ->check(integer_in(1, int64_t{1} << 30))
      ->capture_default_str();
}

AutoRecallConfig auto_recall_config(const RecallFlags& f) {
  AutoRecallConfig c;
  c.method = *parse_recall_method(f.method);
  c.k = static_cast<size_t>(f.k);
  c.neighbours = static_cast<uint32_t>(f.neighbours);
  c.lexical = static_cast<float>(f.lexical);
  c.min_score_ratio = static_cast<float>(f.min_ratio);
  c.velocity_factor = f.velocity;
  c.cooldown_tokens = static_cast<uint64_t>(f.cooldown);
  return c;
}

}  // namespace channel::cli
