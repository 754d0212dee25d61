// Progress of long work on stderr: on a terminal one line redrawn in place (and erased at the
// end, so that an error or the summary still prints cleanly); when stderr is not a terminal,
// a plain line now and then (every CHANNEL_PROGRESS_SECONDS seconds, default 10), so that
// work that ends quickly prints none and logs stay readable.
#pragma once

#include <chrono>
#include <string>

namespace channel::cli {

class Progress {
 public:
  // `label` starts each line: "channel: LABEL: ...".
  explicit Progress(std::string label);
  ~Progress() { clear(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // `fraction` of the work is done (0..1); `detail` says what ("chunk 3/10", "45% of a.txt,
  // 812 tok/s"). The ETA is estimated from the elapsed time and the fraction.
  void update(double fraction, const std::string& detail);
  // Erases the terminal line, if one is shown.
  void clear();
  double seconds() const;

  // "42 s", "3 min 20 s", "1 h 05 min".
  static std::string duration_text(double seconds);

  // The progress of a model load: "channel: loading NAME: 42%". `name` is the model's path
  // (its file name is shown) or "(built-in model)".
  static std::string load_label(const std::string& name);
  void update_load(float fraction);

 private:
  using Clock = std::chrono::steady_clock;
  std::string label_;
  bool tty_;
  double interval_;  // seconds between plain lines
  Clock::time_point start_;
  double last_shown_ = -1.0;
  std::string last_detail_;  // an unchanged detail is not shown again
  bool shown_ = false;
};

}  // namespace channel::cli
