// The request body of /v1/embeddings, parsed and checked field by field: a wrong type or an
// out-of-range value is a 400 naming the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace channel::server {

// One input: a text, or token ids (OpenAI's array-of-integers forms).
struct EmbeddingInput {
  bool is_text = true;
  std::string text;
  std::vector<int32_t> ids;
};

struct EmbeddingRequest {
  std::string model;
  std::vector<EmbeddingInput> inputs;  // 1..kMaxEmbeddingInputs
  bool base64 = false;                 // encoding_format "base64" (else "float")
  int dimensions = 0;                  // 0: not asked
};

// OpenAI's limit on the inputs of one request.
constexpr size_t kMaxEmbeddingInputs = 2048;

// input: a string, an array of strings, an array of token ids or an array of such arrays.
EmbeddingRequest parse_embedding_request(const nlohmann::json& body);

}  // namespace channel::server
