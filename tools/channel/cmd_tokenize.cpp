// `channel tokenize`: text -> a JSON array of token ids, with the model's tokenizer.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "command.h"
#include "tokenizer/tokenizer.h"

namespace channel::cli {
namespace {

struct TokenizeArgs {
  std::string model;
  std::string text;
  bool no_bos = false;
  bool no_special = false;
  bool pieces = false;
};

int run_tokenize(const TokenizeArgs& args) {
  const GgufFile gguf = open_gguf(args.model);
  const Tokenizer tokenizer = Tokenizer::from_gguf(gguf);
  const bool add_bos = tokenizer.add_bos_default() && !args.no_bos;
  const std::vector<int32_t> ids = tokenizer.encode(args.text, add_bos, !args.no_special);
  if (!args.pieces) {
    std::printf("%s\n", nlohmann::json(ids).dump().c_str());
    return 0;
  }
  // One [id, piece] pair per token: the token's own bytes, special tokens as their text (a
  // byte of a multi-byte character split across tokens shows as U+FFFD).
  nlohmann::json pairs = nlohmann::json::array();
  for (int32_t id : ids) pairs.push_back({id, tokenizer.token_to_piece(id)});
  std::printf("%s\n", pairs.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  return 0;
}

const CommandRegistrar registrar{
    "tokenize", "Print the token ids of TEXT as a JSON array (--pieces: with their text)", [](CLI::App& sub) {
      auto args = std::make_shared<TokenizeArgs>();
      add_model_option(sub, args->model);
      sub.add_flag("--no-bos", args->no_bos, "Do not add the model's BOS token");
      sub.add_flag("--no-special", args->no_special,
                   "Treat special-token text such as <s> as plain text");
      sub.add_flag("--pieces", args->pieces,
                   "Print [id, piece] pairs: each token's text beside its id");
      sub.add_option("TEXT", args->text, "Text to tokenize")->required();
      return [args] { return run_tokenize(*args); };
    }};

}  // namespace
}  // namespace channel::cli
