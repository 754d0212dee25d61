// The micro model the session, ring, speculative and session-file tests share: a random
// model of 3 layers small enough to build in a millisecond. With gemma3 layers 0 and 1 slide
// (window 8) and layer 2 is global; with bounded layers 0 and 1 are bounded (W = 8, 2 sinks
// per KV head, partial rotary on 4 of 8 dims) and layer 2 is global; llama and qwen3 have
// 3 global layers. Tests change single fields of the spec where they need to.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "model/model.h"
#include "model/random_model.h"
#include "runtime/ring_session.h"

namespace channel::test {

// The architecture's name as a parameterized test's suffix: "llama", "gemma3", "qwen3", "bounded".
std::string arch_test_name(const ::testing::TestParamInfo<Arch>& info);

// hidden 32, 4 heads and 2 KV heads of 8 dims, FFN 48, vocab 300.
RandomModelSpec micro_model_spec(Arch arch, uint64_t seed = 5);

// A model read in place from its GGUF bytes, which `bytes` keeps alive.
struct BuiltModel {
  std::vector<uint8_t> bytes;
  std::shared_ptr<const Model> model;
};
BuiltModel build_model(const RandomModelSpec& spec, const std::string& name = "micro.gguf");

// The model alone; the returned pointer keeps its bytes alive.
std::shared_ptr<const Model> load_model(const RandomModelSpec& spec,
                                        const std::string& name = "micro.gguf");

// The GGUF bytes of spec's model.
std::vector<uint8_t> model_bytes(const RandomModelSpec& spec);

// A ring session's config for the micro model: the ring's geometry, one thread, chunks of
// 8 tokens.
RingSessionConfig micro_ring_config(RingConfig ring = RingConfig{96, 32, 0, 0});

}  // namespace channel::test
