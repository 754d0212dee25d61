#include "cli_progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

namespace channel::cli {
namespace {

constexpr double kTerminalDelay = 0.5;    // a terminal line appears after this many seconds
constexpr double kTerminalRedraw = 0.1;   // and is redrawn at most this often
constexpr double kDefaultInterval = 10.0;  // plain lines when stderr is not a terminal

double plain_interval() {
  const char* env = std::getenv("CHANNEL_PROGRESS_SECONDS");
  if (!env || !*env) return kDefaultInterval;
  char* end = nullptr;
  const double v = std::strtod(env, &end);
  return (end && *end == '\0' && std::isfinite(v) && v >= 0) ? v : kDefaultInterval;
}

}  // namespace

Progress::Progress(std::string label)
    : label_(std::move(label)),
      tty_(isatty(STDERR_FILENO) == 1),
      interval_(plain_interval()),
      start_(Clock::now()) {}

double Progress::seconds() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

std::string Progress::duration_text(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const auto total = static_cast<long long>(std::llround(s));
  if (total < 60) return fmt::format("{} s", total);
  if (total < 3600) return fmt::format("{} min {:02} s", total / 60, total % 60);
  return fmt::format("{} h {:02} min", total / 3600, (total % 3600) / 60);
}

void Progress::update(double fraction, const std::string& detail) {
  if (detail == last_detail_) return;
  const double now = seconds();
  if (tty_) {
    if (now < kTerminalDelay || (last_shown_ >= 0 && now - last_shown_ < kTerminalRedraw)) return;
  } else if (now - std::max(last_shown_, 0.0) < interval_) {
    return;
  }
  last_shown_ = now;
  last_detail_ = detail;
  fraction = std::clamp(fraction, 0.0, 1.0);
  std::string line = fmt::format("channel: {}: {}", label_, detail);
  if (fraction > 0 && fraction < 1) line += ", ETA " + duration_text(now * (1 - fraction) / fraction);
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
    shown_ = true;
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::fflush(stderr);
}

std::string Progress::load_label(const std::string& name) {
  return "loading " + std::filesystem::path(name).filename().string();
}

void Progress::update_load(float fraction) {
  fraction = std::clamp(fraction, 0.0f, 1.0f);
  update(fraction, fmt::format("{}%", static_cast<int>(fraction * 100.0f)));
}

void Progress::clear() {
  if (!shown_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  shown_ = false;
}

}  // namespace channel::cli
