// Flags and helpers shared by the CLI subcommands: the -m model option with its fallback
// to the embedded default model, -t threads, id-list parsing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "gguf/gguf_reader.h"

namespace channel::cli {

// -m/--model PATH. Left empty, the command uses the embedded default model.
void add_model_option(CLI::App& app, std::string& path);
// -t/--threads N (>= 1), defaulting to default_threads().
void add_threads_option(CLI::App& app, int& threads);
int default_threads();

// Just the GGUF (for commands that need only metadata or the vocabulary).
GgufFile open_gguf(const std::string& path);

// "1,2, 3" -> {1, 2, 3}. Throws channel::Error naming `flag` and the bad entry.
std::vector<int32_t> parse_id_list(std::string_view text, std::string_view flag);

// Checks every id against the vocabulary: "token id 9999 at index 2 is outside the vocabulary
// (0..511)".
void check_ids_in_vocab(std::span<const int32_t> ids, int32_t n_vocab);

// 1536 -> "1.50 KiB"
std::string format_bytes(uint64_t bytes);

}  // namespace channel::cli
