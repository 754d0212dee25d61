#include "cli_common.h"

#include "backend/device.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <ctime>
#include <utility>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cli_errors.h"
#include "cli_progress.h"
#include "embedded_model.h"
#include "model/model.h"
#include "util/error.h"

namespace channel::cli {

namespace {

constexpr const char* kNoDefaultModel = "no default model is built into this binary; pass -m MODEL";

}  // namespace

CLI::Validator integer_in(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        int64_t v = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (text.empty() || ec != std::errc() || end != text.data() + text.size())
          return fmt::format("'{}' is not an integer (allowed: {}..{})", text, lo, hi);
        if (v < lo || v > hi) return fmt::format("{} is out of range (allowed: {}..{})", v, lo, hi);
        return {};
      },
      "");
}

CLI::Validator number_in(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        double v = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (text.empty() || ec != std::errc() || end != text.data() + text.size() ||
            !std::isfinite(v))
          return fmt::format("'{}' is not a number (allowed: {}..{})", text, lo, hi);
        if (v < lo || v > hi)
          return fmt::format("{} is out of range (allowed: {}..{})", text, lo, hi);
        return {};
      },
      "");
}

CLI::Validator non_empty(const std::string& expects) {
  return CLI::Validator(
      [expects](std::string& text) -> std::string {
        if (text.empty()) return fmt::format("empty (expects {})", expects);
        return {};
      },
      "");
}

namespace {
std::vector<std::string>& deferred_warnings() {
  static std::vector<std::string> w;
  return w;
}
}  // namespace

void defer_warning(std::string message) {
  deferred_warnings().push_back(std::move(message));
}

std::vector<std::string> take_deferred_warnings() {
  return std::exchange(deferred_warnings(), {});
}

int default_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

void add_model_option(CLI::App& app, std::string& path) {
  app.add_option("-m,--model", path, "GGUF model file (default: the model built into channel)")
      ->check(non_empty("a GGUF file; leave -m out for the built-in model"));
}

void add_device_option(CLI::App& app, std::string& device) {
  device = "cpu";
  app.add_option("--device", device, "Where the model runs: cpu, cuda or cuda:N")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            try {
              parse_device(text);  // syntax, and whether this build has the backend
            } catch (const Error& e) {
              return e.what();
            }
            return {};
          },
          ""));
}

void add_threads_option(CLI::App& app, int& threads) {
  threads = default_threads();
  app.add_option("-t,--threads", threads,
                 "CPU threads (at most the machine's hardware threads; more are capped)")
      ->check(integer_in(1, 1 << 20))
      ->transform(CLI::Validator(
          [](std::string& text) -> std::string {
            // Transforms run before checks: a value that is not an integer is left to the check.
            const int hw = default_threads();
            int64_t v = 0;
            const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
            const bool integer = !text.empty() && end == text.data() + text.size();
            if (integer && (ec == std::errc::result_out_of_range || (ec == std::errc() && v > hw))) {
              defer_warning(fmt::format("-t: {} threads capped to the {} hardware threads", text, hw));
              text = std::to_string(hw);
            }
            return {};
          },
          ""))
      ->capture_default_str();
}

LoadedModel load_model(const std::string& path) {
  std::string name = path;
  std::span<const unsigned char> embedded;
  if (path.empty()) {
    embedded = embedded_model();
    if (embedded.empty()) throw Error(kNoDefaultModel);
    name = "(built-in model)";
  }
  Progress progress(Progress::load_label(name));
  auto on_progress = [&progress](float f) { progress.update_load(f); };
  std::shared_ptr<const Model> model = path.empty()
                                           ? Model::load_from_memory(embedded, name, on_progress)
                                           : Model::load(path, on_progress);
  progress.clear();
  return {std::move(model), name, progress.seconds()};
}

void print_loaded(const LoadedModel& loaded) {
  const auto& hp = loaded.model->hparams();
  std::fprintf(stderr, "channel: loaded %s: %s, %d layers, %d embd, vocab %d, %s in %.2f s\n",
               loaded.name.c_str(), hp.arch.c_str(), hp.n_layer, hp.n_embd, hp.n_vocab,
               format_bytes(loaded.model->weight_bytes()).c_str(), loaded.seconds);
}

GgufFile open_gguf(const std::string& path) {
  if (!path.empty()) return GgufFile::open(path);
  const auto embedded = embedded_model();
  if (embedded.empty()) throw Error(kNoDefaultModel);
  return GgufFile::from_memory(embedded.data(), embedded.size(), "(built-in model)");
}

std::vector<int32_t> parse_id_list(std::string_view text, std::string_view flag) {
  std::vector<int32_t> ids;
  size_t index = 0;
  while (true) {
    const size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || value < 0 ||
        value > INT32_MAX) {
      throw_usage("{}: entry {} ('{}') is not a token id (allowed: integers 0..{})", flag, index,
                  item, INT32_MAX);
    }
    ids.push_back(static_cast<int32_t>(value));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
    ++index;
  }
  return ids;
}

void check_ids_in_vocab(std::span<const int32_t> ids, int32_t n_vocab) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= n_vocab) {
      throw_error("token id {} at index {} is outside the vocabulary (0..{})", ids[i], i,
                  n_vocab - 1);
    }
  }
}

std::string format_time_ms(uint64_t ms) {
  if (ms == 0) return "never";
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

std::string format_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(units)) {
    value /= 1024.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.2f} {}", value, units[unit]);
}

uint32_t saved_probe_reserve(const std::string& session_path) {
  std::ifstream in(session_path, std::ios::binary);
  char head[48] = {};
  if (!in.read(head, sizeof head) || std::memcmp(head, "CHANSESS", 8) != 0) return 0;
  uint32_t v = 0;
  std::memcpy(&v, head + 40, 4);
  return v;
}

}  // namespace channel::cli
