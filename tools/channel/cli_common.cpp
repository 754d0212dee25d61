#include "cli_common.h"

#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "embedded_model.h"
#include "model/model.h"
#include "util/error.h"

namespace channel::cli {

namespace {

constexpr const char* kNoDefaultModel = "no default model is built into this binary; pass -m MODEL";

// Shows "loading NAME: 42%" on a terminal once a load has taken longer than a moment,
// and erases it again when the load ends (so an error still prints as one clean line).
class ProgressLine {
 public:
  explicit ProgressLine(std::string name)
      : name_(std::move(name)), tty_(isatty(STDERR_FILENO) == 1), start_(Clock::now()) {}
  ~ProgressLine() { clear(); }

  void update(float fraction) {
    if (!tty_ || seconds() < 0.25) return;
    const int percent = static_cast<int>(std::clamp(fraction, 0.0f, 1.0f) * 100.0f);
    if (percent == last_percent_) return;
    last_percent_ = percent;
    std::fprintf(stderr, "\rloading %s: %3d%%", name_.c_str(), percent);
    std::fflush(stderr);
    shown_ = true;
  }
  void clear() {
    if (!shown_) return;
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    shown_ = false;
  }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  using Clock = std::chrono::steady_clock;
  std::string name_;
  bool tty_;
  Clock::time_point start_;
  bool shown_ = false;
  int last_percent_ = -1;
};

}  // namespace

CLI::Validator integer_in(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        int64_t v = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (text.empty() || ec != std::errc() || end != text.data() + text.size())
          return fmt::format("'{}' is not an integer", text);
        if (v < lo || v > hi) return fmt::format("{} is outside [{}, {}]", v, lo, hi);
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
          return fmt::format("'{}' is not a number", text);
        if (v < lo || v > hi) return fmt::format("{} is outside [{}, {}]", text, lo, hi);
        return {};
      },
      "");
}

int default_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

void add_model_option(CLI::App& app, std::string& path) {
  app.add_option("-m,--model", path, "GGUF model file (default: the model built into channel)");
}

void add_threads_option(CLI::App& app, int& threads) {
  threads = default_threads();
  app.add_option("-t,--threads", threads, "CPU threads")
      ->check(integer_in(1, 4096))
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
  ProgressLine progress(std::filesystem::path(name).filename().string());
  auto on_progress = [&progress](float f) { progress.update(f); };
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
      throw_error("{}: entry {} ('{}') is not a token id (a non-negative integer)", flag, index,
                  item);
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
