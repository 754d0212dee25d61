// /v1/embeddings: each input's unit embedding (memory/text_embedding.h: the mean of its
// tokens' final-norm hidden states, the vector episodic recall compares), as float arrays
// or, with encoding_format "base64", the base64 of their little-endian float32 bytes (what
// the openai clients ask for by default). The forward runs on the CPU whatever --device says.
#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>

#include "memory/text_embedding.h"
#include "model/model.h"
#include "runtime/session_base.h"
#include "server/api_error.h"
#include "server/embedding_request.h"
#include "server/server_context.h"
#include "tokenizer/tokenizer.h"
#include "util/base64.h"

namespace channel::server {
namespace {

using nlohmann::json;

static_assert(std::endian::native == std::endian::little, "base64 embeddings are little-endian");

// The token ids of each input, checked against the model and the server's limits.
std::vector<std::vector<int32_t>> input_tokens(const ServerContext& ctx,
                                               const EmbeddingRequest& r) {
  const Model& model = *ctx.config.model;
  const Tokenizer& tok = model.tokenizer();
  const int32_t n_vocab = model.hparams().n_vocab;
  size_t limit = static_cast<size_t>(ctx.config.max_prompt_tokens);
  if (model.hparams().n_ctx_train > 0)
    limit = std::min(limit, static_cast<size_t>(model.hparams().n_ctx_train));
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    const EmbeddingInput& in = r.inputs[i];
    const std::string param = r.inputs.size() > 1 ? "input[" + std::to_string(i) + "]" : "input";
    std::vector<int32_t> ids =
        in.is_text ? tok.encode(in.text, tok.add_bos_default(), true) : in.ids;
    for (const int32_t t : ids)
      if (t >= n_vocab)
        bad_request("token " + std::to_string(t) + " is outside the vocabulary (" +
                        std::to_string(n_vocab) + " tokens)",
                    param);
    const size_t own = !ids.empty() && ids[0] == tok.bos_id() ? ids.size() - 1 : ids.size();
    if (own == 0) bad_request("the input has no tokens of its own", param);
    if (ids.size() > limit)
      bad_request("the input is " + std::to_string(ids.size()) +
                      " tokens, more than this server's limit of " + std::to_string(limit),
                  param, "context_length_exceeded");
    out.push_back(std::move(ids));
  }
  return out;
}

json encoded(const std::vector<float>& v, bool base64) {
  if (!base64) return v;
  std::vector<unsigned char> bytes(v.size() * sizeof(float));
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return base64_encode(bytes);
}

void embeddings(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const EmbeddingRequest r = parse_embedding_request(parse_body(req));
  if (!r.model.empty() && r.model != ctx.config.model_id)
    throw ApiError(404,
                   "the model '" + r.model + "' does not exist (this server has '" +
                       ctx.config.model_id + "')",
                   "model", "model_not_found");
  const int dim = ctx.config.model->hparams().n_embd;
  if (r.dimensions != 0 && r.dimensions != dim)
    bad_request("this model's embeddings have " + std::to_string(dim) +
                    " dimensions and cannot be shortened",
                "dimensions");
  const std::vector<std::vector<int32_t>> tokens = input_tokens(ctx, r);
  GenerationSlots::Lease lease(ctx.slots);
  std::unique_ptr<SessionBase> device;  // the serving device's context, as long as the longest
  std::unique_ptr<Embedder> embedder;
  if (ctx.config.device_context) {
    size_t longest = 1;
    for (const std::vector<int32_t>& t : tokens) longest = std::max(longest, t.size());
    device = ctx.config.device_context(static_cast<int>(longest));
    embedder = std::make_unique<Embedder>(
        ctx.config.model, [&device](std::span<const int32_t> ids, std::vector<float>& rows) {
          device->reset();
          device->hidden_states(ids, rows);
        });
  } else {
    embedder = std::make_unique<Embedder>(ctx.config.model, ctx.config.chat.ring.n_threads);
  }
  json data = json::array();
  size_t n_tokens = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    data.push_back({{"object", "embedding"},
                    {"index", i},
                    {"embedding", encoded(embedder->embed(tokens[i]), r.base64)}});
    n_tokens += tokens[i].size();
  }
  lease.release();
  ctx.metrics.prompt_tokens += n_tokens;
  send_json(res, {{"object", "list"},
                  {"data", std::move(data)},
                  {"model", ctx.config.model_id},
                  {"usage", {{"prompt_tokens", n_tokens}, {"total_tokens", n_tokens}}}});
}

}  // namespace

void register_embedding_routes(httplib::Server& http, ServerContext& ctx) {
  http.Post("/v1/embeddings", [&ctx](const httplib::Request& req, httplib::Response& res) {
    embeddings(ctx, req, res);
  });
}

}  // namespace channel::server
