// `channel serve`: an OpenAI-compatible HTTP server on the slot ring (tools/channel/server/):
// /v1/chat/completions (streaming or not, tools, tool_choice, stop, max_tokens, temperature,
// top_p, seed, response_format json_object), /v1/completions, /v1/models, /health,
// /metrics; Channel's named sessions under /v1/sessions; the live web view at /.
#include <filesystem>
#include <memory>

#include "backend/device.h"
#include "chat_flags.h"
#include "cli_common.h"
#include "command.h"
#include "model/model.h"
#include "server/http_server.h"
#include "util/error.h"

#if defined(CHANNEL_HAS_CUDA)
#include "backend/cuda/cuda_ring.h"
#include "backend/cuda/cuda_session.h"
#include "runtime/cuda_context_session.h"
#endif

namespace channel::cli {
namespace {

struct ServeArgs {
  ChatFlags flags;
  server::ServerConfig server;
  int64_t max_body_kib = 1024;
};

int run_serve(ServeArgs& args) {
  validate_chat_flags(args.flags);
  if (!args.server.data_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(args.server.data_dir, ec);
    if (ec) throw_error("--data-dir {}: {}", args.server.data_dir, ec.message());
  }
  if (!args.flags.memory.empty())
    throw Error("serve: memory is per session (POST /v1/sessions with \"memory\": true and --data-dir)");
  const LoadedModel loaded = load_model(args.flags.model);
  args.server.model = loaded.model;
  args.server.chat = make_chat_config(args.flags, *loaded.model);
  const DeviceSpec device = parse_device(args.flags.device);
  if (device.is_cuda()) {
#if defined(CHANNEL_HAS_CUDA)
    // One upload at start (a model that does not fit fails here, before serving): the ring's
    // sessions share it, and so do the contiguous contexts of scoring and embeddings.
    std::shared_ptr<const cuda::CudaWeights> weights =
        cuda::CudaWeights::upload(loaded.model, device.index);
    std::fprintf(stderr, "channel: running on %s (%s)\n", device.name().c_str(),
                 weights->device_name().c_str());
    args.server.chat.ring.compute = cuda::ring_compute(weights);
    const int threads = args.flags.threads;
    args.server.device_context = [weights, threads](int n_ctx) -> std::unique_ptr<SessionBase> {
      return std::make_unique<CudaContextSession>(weights, n_ctx, threads);
    };
#endif
  }
  args.server.max_body_bytes = static_cast<size_t>(args.max_body_kib) * 1024;
  args.server.default_max_tokens = args.flags.max_tokens;
  print_loaded(loaded);
  std::fprintf(stderr, "channel: chat template %s, %lld slots per session, %d threads per generation\n",
               args.server.chat.chat_template.name.c_str(), static_cast<long long>(args.flags.slots),
               args.flags.threads);
  return server::run_server(args.server);
}

const CommandRegistrar registrar{
    "serve", "OpenAI-compatible HTTP server on the slot ring, with a live web view", [](CLI::App& sub) {
      auto args = std::make_shared<ServeArgs>();
      args->flags.max_tokens = 256;
      add_chat_options(sub, args->flags);
      auto& s = args->server;
      sub.add_option("--host", s.host, "Address to listen on (127.0.0.1: this machine only)")->capture_default_str();
      sub.add_option("--port", s.port, "Port")->check(integer_in(0, 65535))->capture_default_str();
      sub.add_option("--api-key", s.api_key, "Require Authorization: Bearer KEY on the API");
      sub.add_option("--model-id", s.model_id, "The model's name in the API")->capture_default_str();
      sub.add_option("--max-body-kib", args->max_body_kib, "Largest request body, KiB (413 beyond)")
          ->check(integer_in(1, 1 << 20))
          ->capture_default_str();
      sub.add_option("--max-prompt-tokens", s.max_prompt_tokens, "Longest prompt (400 context_length_exceeded beyond)")
          ->check(integer_in(1, 1 << 26))
          ->capture_default_str();
      sub.add_option("--max-concurrent", s.max_concurrent, "Generations at once (503 beyond)")
          ->check(integer_in(1, 1024))
          ->capture_default_str();
      sub.add_option("--max-sessions", s.max_sessions, "Named sessions held (429 beyond)")
          ->check(integer_in(0, 1 << 16))
          ->capture_default_str();
      sub.add_option("--max-stored-responses", s.max_stored_responses,
                     "/v1/responses kept in memory for previous_response_id (the newest)")
          ->check(integer_in(0, 1 << 20))
          ->capture_default_str();
      sub.add_option("--http-threads", s.http_threads, "Connections served at once")
          ->check(integer_in(2, 4096))
          ->capture_default_str();
      sub.add_option("--data-dir", s.data_dir, "Where named sessions are saved and keep their memory");
      CLI::App* app = &sub;
      return [args, app] {
        note_given(*app, args->flags.sampling);
        return run_serve(*args);
      };
    }};

}  // namespace
}  // namespace channel::cli
