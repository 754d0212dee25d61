// Server counters and gauges, rendered as Prometheus text at /metrics.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace channel::server {

class Metrics {
 public:
  void request(const std::string& route, int status);
  std::atomic<uint64_t> prompt_tokens{0}, completion_tokens{0}, streams{0}, disconnects{0};
  std::atomic<int64_t> active_generations{0}, named_sessions{0};
  std::string render() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
};

}  // namespace channel::server
