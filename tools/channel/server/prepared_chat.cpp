// Preparing a chat request's conversation (prepared_chat.h).
#include "server/prepared_chat.h"

#include "chat/json_prefix.h"
#include "model/model.h"
#include "server/api_error.h"
#include "util/error.h"

namespace channel::server {

void check_model(const ServerContext& ctx, const GenerationParams& params) {
  const std::string& model = params.model;
  if (!model.empty() && model != ctx.config.model_id)
    throw ApiError(
        404,
        "the model '" + model + "' does not exist (this server has '" + ctx.config.model_id + "')",
        "model", "model_not_found");
  check_logit_bias(params, ctx.config.model->hparams().n_vocab);
}

void check_prompt_length(const ServerContext& ctx, size_t n_tokens) {
  if (n_tokens > static_cast<size_t>(ctx.config.max_prompt_tokens))
    bad_request("the prompt is " + std::to_string(n_tokens) +
                    " tokens, more than this server's limit of " +
                    std::to_string(ctx.config.max_prompt_tokens),
                "messages", "context_length_exceeded");
}

std::unique_ptr<PreparedChat> prepare_chat(ServerContext& ctx, const ChatRequest& req,
                                           const char* id_prefix) {
  check_model(ctx, req.params);
  auto p = std::make_unique<PreparedChat>();
  ChatConfig config = ctx.config.chat;
  config.memory_path.clear();
  config.system = {};
  size_t first = 0;
  if (req.messages[0].role == ChatRole::system) {
    config.system.text = req.messages[0].content;
    first = 1;
  }
  if (req.tool_choice != ToolChoice::none) config.system.tools = req.tools;
  p->tools_offered = !config.system.tools.empty();
  // The whole prompt as the template renders it, to hold the length limit before any work.
  const ChatOutput rendered =
      render_conversation(config.chat_template, req.messages, config.system.tools, true);
  check_prompt_length(ctx,
                      ctx.config.model->tokenizer().encode(rendered.text(), false, true).size());
  try {
    p->chat = std::make_unique<ChatSession>(ctx.config.model, config);
    for (size_t i = first; i < req.messages.size(); ++i) {
      const ChatMessage& m = req.messages[i];
      switch (m.role) {
        case ChatRole::user:
          p->chat->add_user(m.content);
          break;
        case ChatRole::assistant:
          p->chat->add_assistant(m);
          break;
        case ChatRole::tool:
          p->chat->add_tool_result(m.name, m.content);
          break;
        case ChatRole::system:
          break;  // parse_messages allows it first only
      }
    }
  } catch (const Error& e) {
    bad_request(e.what(), "messages");
  }
  p->options.max_tokens = req.params.max_tokens;
  p->options.stop = req.params.stop;
  p->options.sampling = req.params.sampling;
  p->options.json_object = req.params.json_object;
  p->options.json_schema = req.params.json_schema;
  if (req.tool_choice == ToolChoice::required || req.tool_choice == ToolChoice::named) {
    const ChatFormatter& f = p->chat->formatter();
    p->options.prefix =
        f.tool_call_opener(req.tool_choice == ToolChoice::named ? req.tool_name : "");
    // A named call whose arguments are a JSON object: generate them under the JSON constraint.
    if (req.tool_choice == ToolChoice::named && f.tool_call_closer()) {
      p->options.json_object = true;
      p->options.suffix = *f.tool_call_closer();
      // ... that its parameters' schema accepts (its objects closed, as strict function
      // calling reads them), where it can say so (an object schema).
      for (const ToolSpec& t : req.tools)
        if (t.name == req.tool_name && json_schema_constraint_problem(t.parameters).empty())
          p->options.json_schema = std::make_shared<OrderedJson>(with_closed_objects(t.parameters));
    }
  }
  p->meta = new_meta(id_prefix, ctx.config.model_id);
  p->meta.prompt_tokens = p->chat->stats().clock;
  ctx.metrics.prompt_tokens += p->meta.prompt_tokens;
  return p;
}

}  // namespace channel::server
