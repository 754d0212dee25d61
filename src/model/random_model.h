// Deterministic random-weight GGUF models (llama, gemma3, qwen3 or bounded with mixed layer types)
// with a synthetic SentencePiece vocabulary that llama.cpp also loads: for tests, benchmarks and
// `channel mkmodel`. Weights are N(0, 0.02), norm weights 1 + N(0, 0.1); every tensor draws from
// its own stream seeded by (seed, tensor name, row block), so the output does not depend on
// threads.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "gguf/ggml_type.h"
#include "model/hparams.h"

namespace channel {

class GgufWriter;
class ThreadPool;

struct RandomModelSpec {
  Arch arch = Arch::llama;
  int hidden = 128;
  int layers = 6;
  int heads = 4;
  int kv_heads = 2;
  int head_dim = 32;
  int ffn = 512;
  int window = 32;         // gemma3 sliding window; bounded: W
  int window_pattern = 6;  // gemma3: every 6th layer is global
  int rope_dims = 16;      // bounded: rotary dims rd (even, <= head_dim)
  int sinks = 4;           // bounded: sinks per KV head of each bounded layer
  int global_every = 3;    // bounded: layer il is global iff il % global_every == global_every - 1
  int vocab = 4096;        // >= 261: 4 specials, 256 byte tokens, then pieces
  int context = 8192;
  GgmlType type = GgmlType::F32;  // 2-D weights; norms are always F32
  uint64_t seed = 1;
  // > 0: a random retrieval head of this dim as metadata (channel.retrieval.*,
  // memory/retrieval_head.h), weights N(0, 1 / sqrt(hidden)).
  int retrieval_dim = 0;
};

// Throws channel::Error naming the first invalid field (sizes that are not positive, a
// head_dim that is odd, rows that are not whole quantization blocks, ...).
void validate(const RandomModelSpec& spec);

// Adds the metadata and tensors of the model to `writer`. Names in `skip` (metadata keys or
// tensor names) are left out, which lets tests build deliberately broken files.
void write_random_model(const RandomModelSpec& spec, GgufWriter& writer, ThreadPool& pool,
                        const std::set<std::string>& skip = {});

// llama.cpp's general.file_type for a file whose 2-D weights are all `type` (the _S value
// for the K-quants).
uint32_t llama_file_type_of(GgmlType type);

// The synthetic vocabulary's piece for id (>= 260): distinct strings, shortest first.
std::string synthetic_piece(int index);

}  // namespace channel
