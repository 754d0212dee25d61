// The sampling flags that `run` and `stream` share (--temp, --top-k, --top-p, --min-p,
// --repeat-penalty, --repeat-last-n, --seed), and which of them a command line gave: a
// resumed session keeps its saved sampler except for those.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "runtime/sampler.h"

namespace channel::cli {

struct SamplingFlags {
  SamplerConfig config;            // the values; defaults where a flag was not given
  std::vector<std::string> given;  // the flags on the command line (after note_given)

  bool was_given(std::string_view flag) const;
  // `saved` with the fields of the given flags replaced.
  SamplerConfig over(SamplerConfig saved) const;
};

// Registers the seven flags on `app`, bound to flags.config.
void add_sampling_options(CLI::App& app, SamplingFlags& flags);
// Records which of them were given; call it once the command line is parsed.
void note_given(const CLI::App& app, SamplingFlags& flags);

}  // namespace channel::cli
