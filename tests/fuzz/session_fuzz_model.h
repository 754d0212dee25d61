// The micro model and geometry that the session-file fuzz target and its seeds share
// (session_file_test writes the seeds with CHANNEL_WRITE_FUZZ_SEEDS=DIR).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/model.h"
#include "runtime/ring_session.h"
#include "support/micro_model.h"

namespace channel::fuzz {

// gemma3, 3 layers (two sliding, window 8), 2 KV heads of 8 dims, vocab 300; the weights
// come from `seed`.
inline std::shared_ptr<const Model> make_session_fuzz_model(uint64_t seed) {
  return test::load_model(test::micro_model_spec(Arch::gemma3, seed), "fuzz.gguf");
}

inline std::shared_ptr<const Model> session_fuzz_model() {
  static const std::shared_ptr<const Model> model = make_session_fuzz_model(11);
  return model;
}

inline RingSessionConfig session_fuzz_config() {
  RingSessionConfig c;
  c.ring = RingConfig{48, 4, 2, 0};
  c.n_threads = 1;
  c.n_batch = 8;
  return c;
}

}  // namespace channel::fuzz
