// `channel bench`: prompt-processing and generation speed, measured the way llama-bench
// does (a warm-up, then each test repeated on a cleared context): pp = one batched decode
// of P tokens, tg = N single-token decodes, each after --depth tokens already in the context.
// --device cuda runs the same tests on the GPU (backend/cuda). A table goes to stderr and one
// JSON line, {"prompt_tok_per_s", "prompt_gflop_per_s", "gen_tok_per_s", "gen_gb_per_s",
// "device", "depth"}, ends stdout.
// --cuda-decode v0,v2f,... repeats tg per decode kernel choice (CHANNEL_CUDA_MATVEC variant,
// f = CHANNEL_CUDA_FUSE, p = CHANNEL_CUDA_PDL, a = CHANNEL_CUDA_DECODE_ATTN=one,
// h = CHANNEL_CUDA_HOST_LOGITS, w = CHANNEL_CUDA_WO_INPUT=all, then any +role:vN,
// CHANNEL_CUDA_MATVEC_ROLES), alternating them in each round: a JSON line {"decode", ...} each.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "command.h"
#include "model/model.h"
#include "runtime/sampler.h"
#include "backend/device.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#if defined(CHANNEL_HAS_CUDA)
#include "backend/cuda/cuda_session.h"
#endif

namespace channel::cli {
namespace {

struct BenchArgs {
  std::string model;
  int n_prompt = 512;
  int n_gen = 128;
  int threads = 1;
  int reps = 5;
  int depth = 0;
  bool no_warmup = false;
  std::string device;
  bool no_cuda_graphs = false;
  std::string cuda_decode;  // "v0,v2f,...": the tg test once per decode kernel choice
};

struct Samples {
  std::vector<double> tok_per_s;  // [reps]
  double mean() const {
    double s = 0;
    for (double v : tok_per_s) s += v;
    return tok_per_s.empty() ? 0.0 : s / static_cast<double>(tok_per_s.size());
  }
  double stdev() const {
    if (tok_per_s.size() < 2) return 0.0;
    double m = mean(), s = 0;
    for (double v : tok_per_s) s += (v - m) * (v - m);
    return std::sqrt(s / static_cast<double>(tok_per_s.size() - 1));
  }
};

using Clock = std::chrono::steady_clock;

// Token ids as llama-bench picks them: BOS first when the model adds one, then
// pseudo-random ids (a fixed seed, so every run feeds the same tokens).
class TokenSource {
 public:
  TokenSource(const Model& model) : rng_(1234), n_vocab_(model.hparams().n_vocab) {
    const Tokenizer& tok = model.tokenizer();
    first_ = tok.add_bos_default() ? tok.bos_id() : -1;
  }
  int32_t first() { return first_ >= 0 ? first_ : next(); }
  int32_t next() { return static_cast<int32_t>(rng_.next_u64() % static_cast<uint64_t>(n_vocab_)); }

 private:
  Rng rng_;
  int32_t n_vocab_;
  int32_t first_;
};

// Clears the context, then fills `depth` tokens (untimed).
template <typename S>
void start_at_depth(S& session, TokenSource& tokens, int depth) {
  session.reset();
  if (depth == 0) return;
  std::vector<int32_t> fill(static_cast<size_t>(depth));  // [depth]
  fill[0] = tokens.first();
  for (size_t i = 1; i < fill.size(); ++i) fill[i] = tokens.next();
  session.decode(fill);
}

// One batched decode of n tokens after `depth` tokens.
template <typename S>
double time_prompt(S& session, TokenSource& tokens, int n, int depth) {
  std::vector<int32_t> batch(static_cast<size_t>(n));  // [n]
  batch[0] = depth > 0 ? tokens.next() : tokens.first();
  for (size_t i = 1; i < batch.size(); ++i) batch[i] = tokens.next();
  start_at_depth(session, tokens, depth);
  const auto start = Clock::now();
  session.decode(batch);
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// n single-token decodes after `depth` tokens.
template <typename S>
double time_gen(S& session, TokenSource& tokens, int n, int depth) {
  start_at_depth(session, tokens, depth);
  int32_t token = depth > 0 ? tokens.next() : tokens.first();
  const auto start = Clock::now();
  for (int i = 0; i < n; ++i) {
    session.decode(std::span<const int32_t>(&token, 1));
    token = tokens.next();
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Weight bytes read for one generated token: every matrix once, except that only one
// row of the token embedding is read unless it doubles as the output matrix.
uint64_t streamed_bytes_per_token(const Model& model) {
  uint64_t bytes = model.weight_bytes();
  const TensorInfo* embd = model.gguf().find_tensor("token_embd.weight");
  if (embd != nullptr && !model.weights().tied_output) bytes -= embd->n_bytes;
  return bytes;
}

// Floating-point operations (a multiply-add counts two) of one token of a P-token prompt
// after `depth` tokens: every layer matrix once (the blk.* tensors of two dimensions), the LM
// head once for the whole prompt (only the last token's logits are made), and attention over
// the keys each token sees (sliding and bounded layers their windows). Norms, rope and the
// activations are left out (a few per cent). The yardstick of the prompt rates against the
// cores' FMA peak in bench/compare_llamacpp.sh.
double prompt_flop_per_token(const Model& model, int n_prompt, int depth) {
  if (n_prompt <= 0) return 0.0;
  const ModelHparams& hp = model.hparams();
  double macs = 0.0;
  for (const auto& t : model.gguf().tensors())
    if (t.n_dims == 2 && t.name.starts_with("blk."))
      macs += static_cast<double>(t.ne[0]) * static_cast<double>(t.ne[1]);
  macs += static_cast<double>(hp.n_vocab) * hp.n_embd / n_prompt;
  const double per_key = static_cast<double>(hp.n_head) * (hp.head_dim + hp.head_dim_v);
  for (int il = 0; il < hp.n_layer; ++il) {
    int64_t window = hp.window_of(il);  // 0: every earlier key
    if (hp.is_bounded(il)) window = hp.bounded.window + hp.bounded.n_sinks;
    double keys = 0.0;
    for (int t = 0; t < n_prompt; ++t) {
      const int64_t seen = static_cast<int64_t>(depth) + t + 1;
      keys += static_cast<double>(window > 0 ? std::min(seen, window) : seen);
    }
    macs += per_key * keys / n_prompt;
  }
  return 2.0 * macs;
}

uint64_t parameter_count(const Model& model) {
  uint64_t n = 0;
  for (const auto& t : model.gguf().tensors()) n += static_cast<uint64_t>(t.n_elements());
  return n;
}

template <typename S>
Samples run_test(S& session, const Model& model, const BenchArgs& args, bool prompt) {
  const int n = prompt ? args.n_prompt : args.n_gen;
  Samples samples;
  if (n <= 0) return samples;
  TokenSource tokens(model);
  if (!args.no_warmup) {
    if (prompt) {
      time_prompt(session, tokens, n, 0);
    } else {
      time_gen(session, tokens, 1, 0);
    }
  }
  const bool tty = isatty(STDERR_FILENO) == 1;
  for (int r = 0; r < args.reps; ++r) {
    if (tty) {
      std::fprintf(stderr, "\rbench: %s%d run %d/%d", prompt ? "pp" : "tg", n, r + 1, args.reps);
      std::fflush(stderr);
    }
    const double seconds = prompt ? time_prompt(session, tokens, n, args.depth)
                                  : time_gen(session, tokens, n, args.depth);
    samples.tok_per_s.push_back(n / seconds);
  }
  if (tty) std::fprintf(stderr, "\r\033[K");
  return samples;
}

struct Column {
  const char* title;
  size_t width;  // in characters
  bool left;     // left-aligned (text) or right-aligned (numbers)
};

// Characters of UTF-8 text: every byte that does not continue a character.
size_t display_width(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// The longest prefix of `s` of at most `width` characters.
std::string fit_width(const std::string& s, size_t width) {
  size_t chars = 0, i = 0;
  for (; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 && chars++ == width) break;
  }
  return s.substr(0, i);
}

void print_row(const std::vector<Column>& columns, const std::vector<std::string>& cells) {
  std::string line = "|";
  for (size_t i = 0; i < columns.size(); ++i) {
    const std::string cell = fit_width(cells[i], columns[i].width);
    const std::string pad(columns[i].width - display_width(cell), ' ');
    line += " " + (columns[i].left ? cell + pad : pad + cell) + " |";
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

void print_rule(const std::vector<Column>& columns) {
  std::string line = "|";
  for (const Column& c : columns) line += " " + std::string(c.width, '-') + " |";
  std::fprintf(stderr, "%s\n", line.c_str());
}

int run_bench(const BenchArgs& args) {
  const LoadedModel loaded = load_model(args.model);
  const std::shared_ptr<const Model>& model = loaded.model;
  print_loaded(loaded);
  const DeviceSpec device = parse_device(args.device);
  Samples pp, tg;
  std::string where = "cpu";
  if (!device.is_cuda() && !args.cuda_decode.empty())
    throw_error("bench: --cuda-decode needs --device cuda");
  if (!device.is_cuda()) {
    for (bool prompt : {true, false}) {
      const int n = prompt ? args.n_prompt : args.n_gen;
      if (n <= 0) continue;
      Session session(model, SessionConfig{.n_ctx = n + args.depth, .n_threads = args.threads});
      (prompt ? pp : tg) = run_test(session, *model, args, prompt);
    }
  } else {
#if defined(CHANNEL_HAS_CUDA)
    const auto weights = cuda::CudaWeights::upload(model, device.index);
    where = fmt::format("{} ({})", device.name(), weights->device_name());
    std::fprintf(stderr, "channel: %s, %s of weights on the device%s\n", where.c_str(),
                 format_bytes(weights->device_bytes()).c_str(),
                 args.no_cuda_graphs ? ", CUDA graphs off" : "");
    for (bool prompt : {true, false}) {
      const int n = prompt ? args.n_prompt : args.n_gen;
      if (n <= 0) continue;
      cuda::CudaSession session(weights, cuda::CudaSessionConfig{.n_ctx = n + args.depth,
                                                                 .n_batch = std::max(n, 512),
                                                                 .graphs = !args.no_cuda_graphs});
      (prompt ? pp : tg) = run_test(session, *model, args, prompt);
    }
    // --cuda-decode: the tg test per kernel choice, the choices alternating within each round.
    std::vector<std::string> choices;
    for (size_t p = 0; !args.cuda_decode.empty() && p <= args.cuda_decode.size();) {
      const size_t q = std::min(args.cuda_decode.find(',', p), args.cuda_decode.size());
      choices.push_back(args.cuda_decode.substr(p, q - p));
      p = q + 1;
    }
    std::vector<Samples> per(choices.size());
    for (const std::string& c : choices) cuda::set_decode_kernels(c);  // all valid before timing
    for (int r = 0; r < args.reps && args.n_gen > 0; ++r) {
      for (size_t i = 0; i < choices.size(); ++i) {
        cuda::set_decode_kernels(choices[i]);
        cuda::CudaSession session(weights, cuda::CudaSessionConfig{.n_ctx = args.n_gen + args.depth,
                                                                   .n_batch = std::max(args.n_gen, 512),
                                                                   .graphs = !args.no_cuda_graphs});
        TokenSource tokens(*model);
        time_gen(session, tokens, 1, 0);  // warm-up: captures the graph
        per[i].tok_per_s.push_back(args.n_gen / time_gen(session, tokens, args.n_gen, args.depth));
      }
    }
    for (size_t i = 0; i < choices.size(); ++i) {
      const nlohmann::ordered_json line = {
          {"decode", choices[i]}, {"gen_tok_per_s", per[i].mean()}, {"stdev", per[i].stdev()},
          {"gen_gb_per_s", per[i].mean() * static_cast<double>(streamed_bytes_per_token(*model)) / 1e9},
          {"depth", args.depth}};
      std::printf("%s\n", line.dump().c_str());
    }
#endif
  }
  const uint64_t per_token = streamed_bytes_per_token(*model);
  const double gb_per_s = tg.mean() * static_cast<double>(per_token) / 1e9;

  const std::string name = args.model.empty() ? "(built-in)" : args.model;
  const std::string size = format_bytes(model->weight_bytes());
  const std::string params = fmt::format("{:.2f} M", parameter_count(*model) / 1e6);
  // Widths count characters, not bytes ("±" is two bytes), so that the columns line up.
  const std::vector<Column> columns = {{"model", 24, true},  {"size", 10, true},
                                       {"params", 10, true}, {"device", 7, true},
                                       {"threads", 7, false}, {"test", 14, false},
                                       {"t/s", 20, false},   {"GB/s", 8, false}};
  print_row(columns, {"model", "size", "params", "device", "threads", "test", "t/s", "GB/s"});
  print_rule(columns);
  const std::string short_name =
      fit_width(std::filesystem::path(name).filename().string(), columns[0].width);
  auto row = [&](const char* kind, int n, const Samples& s, const std::string& gbs) {
    if (s.tok_per_s.empty()) return;
    print_row(columns, {short_name, size, params, device.name(), std::to_string(args.threads),
                        args.depth > 0 ? fmt::format("{}{} @ d{}", kind, n, args.depth)
                                       : fmt::format("{}{}", kind, n),
                        fmt::format("{:.2f} ± {:.2f}", s.mean(), s.stdev()), gbs});
  };
  row("pp", args.n_prompt, pp, "");
  row("tg", args.n_gen, tg, fmt::format("{:.2f}", gb_per_s));

  const double gflop_per_s =
      pp.mean() * prompt_flop_per_token(*model, args.n_prompt, args.depth) / 1e9;
  const nlohmann::ordered_json result = {{"prompt_tok_per_s", pp.mean()},
                                         {"prompt_gflop_per_s", gflop_per_s},
                                         {"gen_tok_per_s", tg.mean()},
                                         {"gen_gb_per_s", gb_per_s},
                                         {"device", where},
                                         {"depth", args.depth}};
  std::printf("%s\n", result.dump().c_str());
  return 0;
}

const CommandRegistrar registrar{
    "bench", "Measure prompt and generation speed (like llama-bench)", [](CLI::App& sub) {
      auto args = std::make_shared<BenchArgs>();
      add_model_option(sub, args->model);
      sub.add_option("-p,--n-prompt", args->n_prompt, "Prompt tokens, one batch (0: skip)")
          ->check(integer_in(0, 1 << 20))
          ->capture_default_str();
      sub.add_option("-n,--n-gen", args->n_gen, "Generated tokens (0: skip)")
          ->check(integer_in(0, 1 << 20))
          ->capture_default_str();
      add_threads_option(sub, args->threads);
      sub.add_option("-r,--repetitions", args->reps, "Repetitions of each test")
          ->check(integer_in(1, 1000))
          ->capture_default_str();
      sub.add_flag("--no-warmup", args->no_warmup, "Skip the warm-up runs");
      sub.add_option("-d,--depth", args->depth, "Tokens already in the context before each test")
          ->check(integer_in(0, 1 << 20))
          ->capture_default_str();
      add_device_option(sub, args->device);
      sub.add_flag("--no-cuda-graphs", args->no_cuda_graphs,
                   "CUDA: launch every kernel of a decode step instead of replaying a graph");
      sub.add_option(
          "--cuda-decode", args->cuda_decode,
          "CUDA: also run tg once per decode kernel choice (v0..v8, then any of f = "
          "fused, p = PDL, a = one-kernel attention, h = the LM head writes the "
          "logits to the host, w = attention writes W_o's input in every form, then any "
          "+role:vN for the products qkv, wo, gate_up, down, output; a letter left out is "
          "off: the defaults are v8fphw for Q8_0, v0fphw for F16), e.g. v8fphw,v8fphw+output:v6; "
          "one JSON line each before the summary");
      return [args] { return run_bench(*args); };
    }};

}  // namespace
}  // namespace channel::cli
