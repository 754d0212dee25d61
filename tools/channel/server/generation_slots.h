// A fixed number of generations may run at once (--max-concurrent): each takes a slot for
// its duration; when none is free the request is answered 503 at once instead of queueing
// without bound.
#pragma once

#include <atomic>

#include "server/api_error.h"
#include "server/metrics.h"

namespace channel::server {

class GenerationSlots {
 public:
  GenerationSlots(int n, Metrics& metrics) : free_(n), metrics_(metrics) {}
  class Lease {
   public:
    explicit Lease(GenerationSlots& s) : s_(s) {
      int f = s_.free_.load();
      do {
        if (f <= 0) throw ApiError(503, "the server is busy: every generation slot is taken", "", "server_busy");
      } while (!s_.free_.compare_exchange_weak(f, f - 1));
      ++s_.metrics_.active_generations;
    }
    ~Lease() { release(); }
    // Frees the slot before the response is fully sent (a client that gets [DONE] and asks
    // again at once must find it free). Idempotent.
    void release() {
      if (released_) return;
      released_ = true;
      ++s_.free_;
      --s_.metrics_.active_generations;
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;

   private:
    GenerationSlots& s_;
    bool released_ = false;
  };

 private:
  std::atomic<int> free_;
  Metrics& metrics_;
};

}  // namespace channel::server
