// The shared sampling flags of `run` and `stream`.
#include "sampling_flags.h"

#include <algorithm>
#include <cstdint>

#include "cli_common.h"

namespace channel::cli {
namespace {

constexpr const char* kFlags[] = {"--temp",           "--top-k",         "--top-p", "--min-p",
                                  "--repeat-penalty", "--repeat-last-n", "--seed"};

}  // namespace

bool SamplingFlags::was_given(std::string_view flag) const {
  return std::find(given.begin(), given.end(), flag) != given.end();
}

SamplerConfig SamplingFlags::over(SamplerConfig saved) const {
  if (was_given("--temp")) saved.temperature = config.temperature;
  if (was_given("--top-k")) saved.top_k = config.top_k;
  if (was_given("--top-p")) saved.top_p = config.top_p;
  if (was_given("--min-p")) saved.min_p = config.min_p;
  if (was_given("--repeat-penalty")) saved.repeat_penalty = config.repeat_penalty;
  if (was_given("--repeat-last-n")) saved.repeat_last_n = config.repeat_last_n;
  if (was_given("--seed")) saved.seed = config.seed;
  // Not held by session files: always the flags' (0, off, unless given).
  saved.presence_penalty = config.presence_penalty;
  saved.frequency_penalty = config.frequency_penalty;
  return saved;
}

void add_sampling_options(CLI::App& app, SamplingFlags& flags) {
  SamplerConfig& s = flags.config;
  app.add_option("--temp", s.temperature, "Temperature (0: greedy)")
      ->check(number_in(0.0, 1e6))
      ->capture_default_str();
  app.add_option("--top-k", s.top_k, "Keep the K most likely tokens (0: off)")
      ->check(integer_in(0, 1 << 30))
      ->capture_default_str();
  app.add_option("--top-p", s.top_p, "Keep the smallest set with probability mass P (1: off)")
      ->check(number_in(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--min-p", s.min_p, "Drop tokens below P x the top probability (0: off)")
      ->check(number_in(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--repeat-penalty", s.repeat_penalty,
                 "Penalise the last --repeat-last-n tokens (1: off)")
      ->check(number_in(1e-6, 1e6))
      ->capture_default_str();
  app.add_option("--repeat-last-n", s.repeat_last_n, "Tokens the repeat penalty looks at")
      ->check(integer_in(0, 1 << 20))
      ->capture_default_str();
  app.add_option("--presence-penalty", s.presence_penalty,
                 "Subtract P from the logit of each token among the last --repeat-last-n (0: off)")
      ->check(number_in(-2.0, 2.0))
      ->capture_default_str();
  app.add_option("--frequency-penalty", s.frequency_penalty,
                 "Subtract F x its count there from each such token's logit (0: off)")
      ->check(number_in(-2.0, 2.0))
      ->capture_default_str();
  app.add_option("--seed", s.seed, "Random seed (the same seed gives the same text)")
      ->check(integer_in(0, INT64_MAX))
      ->capture_default_str();
}

void note_given(const CLI::App& app, SamplingFlags& flags) {
  flags.given.clear();
  for (const char* flag : kFlags)
    if (app.get_option(flag)->count() > 0) flags.given.emplace_back(flag);
}

}  // namespace channel::cli
