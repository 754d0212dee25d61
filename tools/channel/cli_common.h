// Flags and helpers shared by the CLI subcommands: the -m model option with its fallback
// to the embedded default model, -t threads, load progress on stderr, id-list parsing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "gguf/gguf_reader.h"

namespace channel {
class Model;
}

namespace channel::cli {

// Flag-value checks with plain messages: "--ctx: '1k' is not an integer (allowed: 1..16777216)",
// "--top-p: 2 is out of range (allowed: 0..1)".
CLI::Validator integer_in(int64_t lo, int64_t hi);
CLI::Validator number_in(double lo, double hi);
// Refuses an empty value: "--session: empty (expects a file path)".
CLI::Validator non_empty(const std::string& expects);

// -m/--model PATH. Left out, the command uses the embedded default model; -m "" is an error.
void add_model_option(CLI::App& app, std::string& path);
// -t/--threads N (>= 1), defaulting to default_threads(). More than the machine's hardware
// threads is capped to them, with a warning.
void add_threads_option(CLI::App& app, int& threads);
// --device cpu|cuda[:N] (backend/device.h); checked when the command runs.
void add_device_option(CLI::App& app, std::string& device);
int default_threads();

// Warnings found while parsing flags (e.g. the -t cap), printed by main once the command line
// parsed: a parse error stays the only line on stderr.
void defer_warning(std::string message);
std::vector<std::string> take_deferred_warnings();

// Episodes a new episodic store holds when run, stream or mem create makes one.
inline constexpr uint32_t kDefaultStoreCapacity = 4096;

struct LoadedModel {
  std::shared_ptr<const Model> model;
  std::string name;  // the path, or "(built-in model)"
  double seconds = 0.0;
};

// Loads `path`, or the embedded model when it is empty. On a terminal a progress line
// is updated while a load takes long, and erased at the end. Throws channel::Error,
// e.g. when no model is given and none is built in.
LoadedModel load_model(const std::string& path);
// One summary line on stderr: "channel: loaded NAME: ARCH, N layers, ..., SIZE in T s".
// Commands print it once their input has been checked, so that bad input still gets
// exactly one line.
void print_loaded(const LoadedModel& loaded);

// Just the GGUF (for commands that need only metadata or the vocabulary).
GgufFile open_gguf(const std::string& path);

// "1,2, 3" -> {1, 2, 3}. Throws channel::Error naming `flag` and the bad entry.
std::vector<int32_t> parse_id_list(std::string_view text, std::string_view flag);

// Checks every id against the vocabulary: "token id 9999 at index 2 is outside the vocabulary
// (0..511)".
void check_ids_in_vocab(std::span<const int32_t> ids, int32_t n_vocab);

// 1536 -> "1.50 KiB"
std::string format_bytes(uint64_t bytes);
// Milliseconds since the Unix epoch -> "2026-12-01 15:04:05 UTC"; 0 -> "never".
std::string format_time_ms(uint64_t ms);

// The probe reserve a session file was saved with (docs/formats.md, "Session files", header
// offset 40), so that a resumed session gets the geometry it was saved with; 0 when the file
// cannot be read as a session (loading it then reports why).
uint32_t saved_probe_reserve(const std::string& session_path);
// The probe reserve of a new session whose prompts recall automatically: one free window slot
// lets the prompt's last token run as a probe before it is fed (memory/auto_recall.h).
inline constexpr uint32_t kAutoRecallProbeReserve = 1;

}  // namespace channel::cli
