// A model for the recall benchmarks (memory_rehydrate_bench, cuda_recall_bench): Gemma 3
// shaped (NEOX rope over the whole head, as channel-default and Gemma 3 12B), every layer
// global (window pattern 1) so every layer holds recall slots, with the given K/V geometry and
// tiny everywhere else. Its 2-D weights are `type`: f32 weights give the device an f32 K/V
// arena, any other type f16 (as a 12B q8_0 model's).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "model/random_model.h"

namespace channel::bench {

inline std::shared_ptr<const Model> recall_geometry_model(uint32_t layers, uint32_t kv_heads,
                                                          uint32_t head_dim,
                                                          GgmlType type = GgmlType::F32) {
  RandomModelSpec s;
  s.type = type;
  s.arch = Arch::gemma3;
  s.window_pattern = 1;
  s.hidden = 64;
  s.layers = static_cast<int>(layers);
  s.heads = static_cast<int>(kv_heads);
  s.kv_heads = static_cast<int>(kv_heads);
  s.head_dim = static_cast<int>(head_dim);
  s.ffn = 64;
  s.vocab = 300;
  ThreadPool pool(1);
  GgufWriter w;
  write_random_model(s, w, pool);
  auto bytes = std::make_shared<std::vector<uint8_t>>(w.to_bytes());
  auto m = Model::load_from_memory(*bytes, "recall-bench.gguf");
  // The model reads the bytes in place: they live as long as it does.
  return std::shared_ptr<const Model>(m.get(), [m, bytes](const Model*) {});
}

}  // namespace channel::bench
