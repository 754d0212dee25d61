// The micro model and geometry that the session-file fuzz target and its seeds share
// (session_file_test writes the seeds with CHANNEL_WRITE_FUZZ_SEEDS=DIR).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "model/random_model.h"
#include "runtime/ring_session.h"

namespace channel::fuzz {

// gemma3, 3 layers (two sliding, window 8), 2 KV heads of 8 dims, vocab 300; the weights
// come from `seed`.
inline std::shared_ptr<const Model> make_session_fuzz_model(uint64_t seed) {
  // The model reads the bytes in place: one holder keeps both alive.
  struct Holder {
    std::vector<uint8_t> bytes;
    std::shared_ptr<const Model> model;
  };
  auto h = std::make_shared<Holder>();
  h->bytes = [seed] {
    RandomModelSpec s;
    s.arch = Arch::gemma3;
    s.hidden = 32;
    s.layers = 3;
    s.heads = 4;
    s.kv_heads = 2;
    s.head_dim = 8;
    s.ffn = 48;
    s.window = 8;
    s.window_pattern = 3;
    s.vocab = 300;
    s.seed = seed;
    ThreadPool pool(1);
    GgufWriter w;
    write_random_model(s, w, pool);
    return w.to_bytes();
  }();
  h->model = Model::load_from_memory(h->bytes, "fuzz.gguf");
  return std::shared_ptr<const Model>(h, h->model.get());
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
