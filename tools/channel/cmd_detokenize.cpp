// `channel detokenize`: a comma-separated list of token ids -> the text they spell.
#include <cstdio>

#include "cli_common.h"
#include "command.h"
#include "tokenizer/tokenizer.h"

namespace channel::cli {
namespace {

struct DetokenizeArgs {
  std::string model;
  std::string ids;
};

int run_detokenize(const DetokenizeArgs& args) {
  const std::vector<int32_t> ids = parse_id_list(args.ids, "--ids");
  const GgufFile gguf = open_gguf(args.model);
  const Tokenizer tokenizer = Tokenizer::from_gguf(gguf);
  check_ids_in_vocab(ids, tokenizer.n_vocab());
  const std::string text = tokenizer.decode(ids);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
  return 0;
}

const CommandRegistrar registrar{
    "detokenize", "Print the text of a list of token ids", [](CLI::App& sub) {
      auto args = std::make_shared<DetokenizeArgs>();
      add_model_option(sub, args->model);
      sub.add_option("--ids", args->ids, "Comma-separated token ids, e.g. 1,403,407")->required();
      return [args] { return run_detokenize(*args); };
    }};

}  // namespace
}  // namespace channel::cli
