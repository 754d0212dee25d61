// Prometheus text exposition of the server's metrics (metrics.h).
#include "server/metrics.h"

#include <fstream>
#include <sstream>
#include <unistd.h>

namespace channel::server {
namespace {
uint64_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}
}  // namespace

void Metrics::request(const std::string& route, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{route, status}];
}

std::string Metrics::render() const {
  std::ostringstream o;
  o << "# HELP channel_requests_total HTTP requests by route and status.\n"
       "# TYPE channel_requests_total counter\n";
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, n] : requests_)
      o << "channel_requests_total{route=\"" << key.first << "\",status=\"" << key.second << "\"} " << n << "\n";
  }
  o << "# HELP channel_prompt_tokens_total Prompt tokens prefilled.\n# TYPE channel_prompt_tokens_total counter\n"
    << "channel_prompt_tokens_total " << prompt_tokens << "\n"
    << "# HELP channel_completion_tokens_total Tokens generated.\n# TYPE channel_completion_tokens_total counter\n"
    << "channel_completion_tokens_total " << completion_tokens << "\n"
    << "# HELP channel_streams_total Streaming responses.\n# TYPE channel_streams_total counter\n"
    << "channel_streams_total " << streams << "\n"
    << "# HELP channel_client_disconnects_total Streams ended by the client.\n# TYPE channel_client_disconnects_total counter\n"
    << "channel_client_disconnects_total " << disconnects << "\n"
    << "# HELP channel_active_generations Generations running now.\n# TYPE channel_active_generations gauge\n"
    << "channel_active_generations " << active_generations << "\n"
    << "# HELP channel_named_sessions Named sessions held.\n# TYPE channel_named_sessions gauge\n"
    << "channel_named_sessions " << named_sessions << "\n"
    << "# HELP channel_resident_memory_bytes Resident set size.\n# TYPE channel_resident_memory_bytes gauge\n"
    << "channel_resident_memory_bytes " << rss_bytes() << "\n";
  return o.str();
}

}  // namespace channel::server
