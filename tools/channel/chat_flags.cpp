// Shared flags of `chat` and `serve` (chat_flags.h).
#include "chat_flags.h"

#include "backend/device.h"
#include "cli_common.h"
#include "model/model.h"
#include "runtime/ring_device.h"
#include "util/error.h"

namespace channel::cli {

void add_chat_options(CLI::App& sub, ChatFlags& f) {
  add_model_option(sub, f.model);
  sub.add_option("--system", f.system_file,
                 "System prompt FILE; YAML front matter between --- lines may define tools "
                 "(name, description, parameters as a JSON schema). Prefilled into the anchors");
  sub.add_option("--chat-template", f.chat_template,
                 "Chat template: " + chat_template_names() +
                     " (default: recognised from the GGUF's tokenizer.chat_template, else channel)");
  add_threads_option(sub, f.threads);
  add_device_option(sub, f.device);
  sub.add_option("--slots", f.slots, "KV slots per global layer (the ring)")
      ->check(integer_in(1, 1 << 30))
      ->capture_default_str();
  sub.add_option("--recall-slots", f.recall, "Recall slots (tier 3)")
      ->check(integer_in(0, 1 << 30))
      ->capture_default_str();
  sub.add_option("--memory", f.memory,
                 "Attach the episodic store FILE (created if missing): episodes closest to each "
                 "user message are recalled, what leaves the window is stored");
  sub.add_option("--memory-capacity", f.memory_capacity, "With --memory: episodes a new store holds")
      ->check(integer_in(1, 1 << 24))
      ->capture_default_str();
  add_recall_options(sub, f.recall_flags, "at each user message or tool result");
  sub.add_option("-n,--max-tokens", f.max_tokens, "Most tokens per reply")
      ->check(integer_in(1, 1 << 20))
      ->capture_default_str();
  add_sampling_options(sub, f.sampling);
}

void validate_chat_flags(const ChatFlags& f) {
  validate(f.sampling.config);
  if (!f.chat_template.empty()) chat_template_by_name(f.chat_template, "");
  if (!f.system_file.empty()) read_system_prompt_file(f.system_file);
}

ChatTemplateSpec chat_template_for(const ChatFlags& f, const Model& model) {
  const Tokenizer& tok = model.tokenizer();
  const std::string bos =
      tok.add_bos_default() && tok.bos_id() >= 0 ? tok.token_to_piece(tok.bos_id()) : "";
  if (!f.chat_template.empty()) return chat_template_by_name(f.chat_template, bos);
  return detect_chat_template(model.gguf().get_string_or("tokenizer.chat_template", ""), bos);
}

ChatConfig make_chat_config(const ChatFlags& f, const Model& model) {
  ChatConfig c;
  c.ring.ring.n_slots = static_cast<uint32_t>(f.slots);
  c.ring.ring.n_recall = static_cast<uint32_t>(f.recall);
  c.ring.n_threads = f.threads;
  c.ring.compute = ring_compute_for(parse_device(f.device));
  c.sampling = f.sampling.config;
  c.chat_template = chat_template_for(f, model);
  if (!f.system_file.empty()) c.system = read_system_prompt_file(f.system_file);
  c.memory_path = f.memory;
  c.memory_capacity = static_cast<uint32_t>(f.memory_capacity);
  c.auto_recall = f.recall_flags.automatic();
  c.recall = auto_recall_config(f.recall_flags);
  c.recall_copy = static_cast<float>(f.recall_flags.copy);
  return c;
}

}  // namespace channel::cli
