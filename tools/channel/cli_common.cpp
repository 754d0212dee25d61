#include "cli_common.h"

#include <charconv>
#include <cstdio>
#include <thread>

#include "embedded_model.h"
#include "util/error.h"

namespace channel::cli {

namespace {

constexpr const char* kNoDefaultModel = "no default model is built into this binary; pass -m MODEL";

}  // namespace

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
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
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

}  // namespace channel::cli
