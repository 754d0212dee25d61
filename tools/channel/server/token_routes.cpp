// POST /tokenize and /detokenize, as llama.cpp's server has them (clients count a prompt's
// tokens before sending it): {"content": TEXT, "add_special": bool, "with_pieces": bool} ->
// {"tokens": [...], "count"}; {"tokens": [...]} -> {"content": TEXT}. vLLM's "prompt" is
// read as "content".
#include "model/model.h"
#include "server/api_error.h"
#include "server/server_context.h"
#include "tokenizer/tokenizer.h"

namespace channel::server {
namespace {

using nlohmann::json;

bool flag(const json& body, const char* name, bool otherwise) {
  const auto it = body.find(name);
  if (it == body.end() || it->is_null()) return otherwise;
  if (!it->is_boolean()) bad_request(std::string(name) + " must be a boolean", name);
  return it->get<bool>();
}

void tokenize(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req);
  if (!body.is_object()) bad_request("the body must be a JSON object");
  const char* field = body.contains("content") ? "content" : "prompt";
  const auto text = body.find(field);
  if (text == body.end() || !text->is_string()) bad_request("content must be a string", "content");
  const Tokenizer& tok = ctx.config.model->tokenizer();
  const bool special = flag(body, "add_special", false);
  const std::vector<int32_t> ids =
      tok.encode(text->get<std::string>(), special && tok.add_bos_default(),
                 flag(body, "parse_special", true));
  json tokens = json::array();
  if (flag(body, "with_pieces", false)) {
    for (const int32_t t : ids) tokens.push_back({{"id", t}, {"piece", tok.token_to_piece(t)}});
  } else {
    tokens = ids;
  }
  send_json(
      res,
      {{"tokens", tokens}, {"count", ids.size()}, {"max_model_len", ctx.config.max_prompt_tokens}});
}

void detokenize(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req);
  if (!body.is_object() || !body.contains("tokens") || !body["tokens"].is_array())
    bad_request("tokens must be a list of token ids", "tokens");
  const int32_t n_vocab = ctx.config.model->hparams().n_vocab;
  std::vector<int32_t> ids;
  for (const json& t : body["tokens"]) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= n_vocab)
      bad_request("a token id must be an integer from 0 to " + std::to_string(n_vocab - 1),
                  "tokens");
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  send_json(res, {{"content", ctx.config.model->tokenizer().decode(ids)}});
}

}  // namespace

void register_token_routes(httplib::Server& http, ServerContext& ctx) {
  http.Post("/tokenize", [&ctx](const httplib::Request& req, httplib::Response& res) {
    tokenize(ctx, req, res);
  });
  http.Post("/detokenize", [&ctx](const httplib::Request& req, httplib::Response& res) {
    detokenize(ctx, req, res);
  });
}

}  // namespace channel::server
