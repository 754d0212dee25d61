// Parsing /v1/embeddings request bodies (embedding_request.h).
#include "server/embedding_request.h"

#include <limits>

#include "server/api_error.h"

namespace channel::server {
namespace {

using nlohmann::json;

const char* const kInputShape =
    "input must be a string, an array of strings, an array of token ids or an array of "
    "arrays of token ids";

std::vector<int32_t> token_ids(const json& a, const std::string& param) {
  if (a.empty()) bad_request("a list of token ids must not be empty", param);
  std::vector<int32_t> ids;
  for (const json& t : a) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
        t.get<int64_t>() > std::numeric_limits<int32_t>::max())
      bad_request("a token id must be a non-negative integer", param);
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return ids;
}

EmbeddingInput text_input(const json& s, const std::string& param) {
  if (s.get_ref<const std::string&>().empty()) bad_request("an input must not be empty", param);
  return {true, s.get<std::string>(), {}};
}

}  // namespace

EmbeddingRequest parse_embedding_request(const json& body) {
  if (!body.is_object()) bad_request("the body must be a JSON object");
  EmbeddingRequest r;
  if (const auto m = body.find("model"); m != body.end() && !m->is_null()) {
    if (!m->is_string()) bad_request("model must be a string", "model");
    r.model = m->get<std::string>();
  }
  const auto in = body.find("input");
  if (in == body.end() || in->is_null()) bad_request("input is required", "input");
  if (in->is_string()) {
    r.inputs.push_back(text_input(*in, "input"));
  } else if (!in->is_array() || in->empty()) {
    bad_request(kInputShape, "input");
  } else if ((*in)[0].is_number()) {
    r.inputs.push_back({false, "", token_ids(*in, "input")});
  } else {
    if (in->size() > kMaxEmbeddingInputs)
      bad_request("at most " + std::to_string(kMaxEmbeddingInputs) + " inputs in one request",
                  "input");
    const bool texts = (*in)[0].is_string();
    for (size_t i = 0; i < in->size(); ++i) {
      const json& x = (*in)[i];
      const std::string param = "input[" + std::to_string(i) + "]";
      if (texts && x.is_string()) {
        r.inputs.push_back(text_input(x, param));
      } else if (!texts && x.is_array()) {
        r.inputs.push_back({false, "", token_ids(x, param)});
      } else {
        bad_request(kInputShape, param);
      }
    }
  }
  if (const auto f = body.find("encoding_format"); f != body.end() && !f->is_null()) {
    if (!f->is_string() || (*f != "float" && *f != "base64"))
      bad_request("encoding_format must be \"float\" or \"base64\"", "encoding_format");
    r.base64 = *f == "base64";
  }
  if (const auto d = body.find("dimensions"); d != body.end() && !d->is_null()) {
    if (!d->is_number_integer() || d->get<int64_t>() < 1 ||
        d->get<int64_t>() > std::numeric_limits<int32_t>::max())
      bad_request("dimensions must be a positive integer", "dimensions");
    r.dimensions = static_cast<int>(d->get<int64_t>());
  }
  if (const auto u = body.find("user"); u != body.end() && !u->is_null() && !u->is_string())
    bad_request("user must be a string", "user");
  return r;
}

}  // namespace channel::server
