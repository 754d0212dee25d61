// The shared micro model: its spec and the GGUF bytes and Model built from a spec.
#include "support/micro_model.h"

#include "backend/cpu/thread_pool.h"
#include "gguf/gguf_writer.h"

namespace channel::test {

std::string arch_test_name(const ::testing::TestParamInfo<Arch>& info) {
  switch (info.param) {
    case Arch::llama:
      return "llama";
    case Arch::gemma3:
      return "gemma3";
    case Arch::qwen3:
      return "qwen3";
    case Arch::bounded:
      return "bounded";
  }
  return "unknown";
}

RandomModelSpec micro_model_spec(Arch arch, uint64_t seed) {
  RandomModelSpec s;
  s.arch = arch;
  s.hidden = 32;
  s.layers = 3;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 8;
  s.ffn = 48;
  s.window = 8;          // gemma3 sliding window; bounded W
  s.window_pattern = 3;  // gemma3: layers 0, 1 sliding, 2 global
  s.rope_dims = 4;       // bounded: partial rotary on every layer
  s.sinks = 2;
  s.global_every = 3;  // bounded: layers 0, 1 bounded, 2 global
  s.vocab = 300;
  s.seed = seed;
  return s;
}

std::vector<uint8_t> model_bytes(const RandomModelSpec& spec) {
  ThreadPool pool(1);
  GgufWriter w;
  write_random_model(spec, w, pool);
  return w.to_bytes();
}

BuiltModel build_model(const RandomModelSpec& spec, const std::string& name) {
  BuiltModel b{model_bytes(spec), nullptr};
  b.model = Model::load_from_memory(b.bytes, name);
  return b;
}

std::shared_ptr<const Model> load_model(const RandomModelSpec& spec, const std::string& name) {
  auto b = std::make_shared<BuiltModel>(build_model(spec, name));
  return std::shared_ptr<const Model>(b, b->model.get());
}

RingSessionConfig micro_ring_config(RingConfig ring) {
  RingSessionConfig c;
  c.ring = ring;
  c.n_threads = 1;
  c.n_batch = 8;
  return c;
}

}  // namespace channel::test
