// `channel embed`: each TEXT's unit embedding (memory/text_embedding.h, what the server's
// /v1/embeddings returns) as one JSON array a line.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "backend/device.h"
#include "cli_common.h"
#include "command.h"
#include "memory/text_embedding.h"
#include "model/model.h"
#include "runtime/context_device.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace channel::cli {
namespace {

struct EmbedArgs {
  std::string model;
  std::vector<std::string> texts;
  bool lines = false;  // read one text a line from standard input
  int threads = 0;
  std::string device = "cpu";
};

int run_embed(EmbedArgs args) {
  if (args.lines) {
    for (std::string line; std::getline(std::cin, line);)
      if (!line.empty()) args.texts.push_back(line);
  }
  if (args.texts.empty())
    throw Error("embed: no text (give TEXT or --lines with text on standard input)");
  const LoadedModel loaded = load_model(args.model);
  const Tokenizer& tok = loaded.model->tokenizer();
  std::vector<std::vector<int32_t>> ids;
  for (size_t i = 0; i < args.texts.size(); ++i) {
    ids.push_back(tok.encode(args.texts[i], tok.add_bos_default(), true));
    const size_t own = ids.back().size() - (!ids.back().empty() && ids.back()[0] == tok.bos_id());
    if (own == 0) throw_error("embed: text {} has no tokens", i + 1);
  }
  print_loaded(loaded);
  const DeviceSpec device = parse_device(args.device);
  std::unique_ptr<Embedder> embedder;
  std::unique_ptr<SessionBase> context;  // on a device: one context as long as the longest text
  if (device.is_cuda()) {
    size_t longest = 1;
    for (const std::vector<int32_t>& t : ids) longest = std::max(longest, t.size());
    ContextSession c =
        context_session_for(loaded.model, device, static_cast<int>(longest), args.threads);
    std::fprintf(stderr, "channel: running on %s\n", c.where.c_str());
    context = std::move(c.session);
    embedder = std::make_unique<Embedder>(
        loaded.model, [&context](std::span<const int32_t> tokens, std::vector<float>& rows) {
          context->reset();
          context->hidden_states(tokens, rows);
        });
  } else {
    embedder = std::make_unique<Embedder>(loaded.model, args.threads);
  }
  for (const std::vector<int32_t>& t : ids)
    std::printf("%s\n", nlohmann::json(embedder->embed(t)).dump().c_str());
  return 0;
}

const CommandRegistrar registrar{
    "embed", "Print each TEXT's unit embedding (mean final hidden state) as a JSON array a line",
    [](CLI::App& sub) {
      auto args = std::make_shared<EmbedArgs>();
      add_model_option(sub, args->model);
      add_threads_option(sub, args->threads);
      add_device_option(sub, args->device);
      sub.add_flag("--lines", args->lines, "Also embed each non-empty line of standard input");
      sub.add_option("TEXT", args->texts, "Texts to embed");
      return [args] { return run_embed(*args); };
    }};

}  // namespace
}  // namespace channel::cli
