// OpenAI response shapes (openai_response.h).
#include "server/openai_response.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <utility>

#include "server/api_error.h"

namespace channel::server {

using nlohmann::json;

ResponseMeta new_meta(const std::string& prefix, const std::string& model) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t boot = std::random_device{}();
  ResponseMeta m;
  char id[64];
  std::snprintf(id, sizeof id, "%s-%08llx%06llx", prefix.c_str(),
                static_cast<unsigned long long>(boot & 0xffffffffu),
                static_cast<unsigned long long>(++counter));
  m.id = id;
  m.created = std::chrono::duration_cast<std::chrono::seconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  m.model = model;
  return m;
}

std::string new_item_id(const char* prefix) {
  std::string id = new_meta(prefix, "").id;
  std::replace(id.begin(), id.end(), '-', '_');
  return id;
}

json usage_json(uint64_t prompt_tokens, uint64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

json tool_calls_json(const std::vector<ToolCall>& calls) {
  json a = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    a.push_back({{"index", i},
                 {"id", calls[i].id},
                 {"type", "function"},
                 {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments.dump()}}}});
  }
  return a;
}

std::string openai_finish(FinishReason finish) {
  switch (finish) {
    case FinishReason::length: return "length";
    case FinishReason::tool_calls: return "tool_calls";
    default: return "stop";
  }
}

namespace {

json piece_bytes(const std::string& piece) {
  json b = json::array();
  for (const char c : piece) b.push_back(static_cast<unsigned char>(c));
  return b;
}

}  // namespace

json chat_logprobs(const Tokenizer& tok, std::span<const ReplyLogprob> entries, size_t text_end) {
  json content = json::array();
  for (const ReplyLogprob& e : entries) {
    if (e.offset >= text_end) continue;
    const std::string piece = tok.token_to_piece(e.token, false);
    json top = json::array();
    for (const auto& [id, lp] : e.logprobs.top) {
      const std::string p = tok.token_to_piece(id, false);
      top.push_back({{"token", p}, {"logprob", lp}, {"bytes", piece_bytes(p)}});
    }
    content.push_back({{"token", piece},
                       {"logprob", e.logprobs.logprob},
                       {"bytes", piece_bytes(piece)},
                       {"top_logprobs", top}});
  }
  return {{"content", content}, {"refusal", nullptr}};
}

json completion_logprobs(const Tokenizer& tok, std::span<const ReplyLogprob> entries,
                         size_t text_end, size_t base) {
  json tokens = json::array(), logprobs = json::array(), tops = json::array(),
       offsets = json::array();
  for (const ReplyLogprob& e : entries) {
    if (e.offset >= text_end) continue;
    tokens.push_back(tok.token_to_piece(e.token, false));
    logprobs.push_back(e.logprobs.logprob);
    json top = json::object();
    for (const auto& [id, lp] : e.logprobs.top) top[tok.token_to_piece(id, false)] = lp;
    tops.push_back(top);
    offsets.push_back(base + e.offset);
  }
  return {{"tokens", tokens},
          {"token_logprobs", logprobs},
          {"top_logprobs", tops},
          {"text_offset", offsets}};
}

json prompt_completion_logprobs(const Tokenizer& tok, std::span<const int32_t> ids,
                                std::span<const StepLogprobs> scores, size_t first) {
  json tokens = json::array(), logprobs = json::array(), tops = json::array(),
       offsets = json::array();
  size_t offset = 0;
  for (size_t i = first; i < ids.size(); ++i) {
    const std::string piece = tok.token_to_piece(ids[i], false);
    tokens.push_back(piece);
    if (i == 0) {
      logprobs.push_back(nullptr);
      tops.push_back(nullptr);
    } else {
      logprobs.push_back(scores[i].logprob);
      json top = json::object();
      for (const auto& [id, lp] : scores[i].top) top[tok.token_to_piece(id, false)] = lp;
      tops.push_back(top);
    }
    offsets.push_back(offset);
    offset += piece.size();
  }
  return {{"tokens", tokens},
          {"token_logprobs", logprobs},
          {"top_logprobs", tops},
          {"text_offset", offsets}};
}

json joined_completion_logprobs(json a, const json& b) {
  if (b.is_null()) return a;
  for (const char* k : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
    for (const json& x : b[k]) a[k].push_back(x);
  return a;
}

json chat_completion(const ResponseMeta& m, const ChatReply& reply, const json& logprobs) {
  json message = {{"role", "assistant"}};
  if (!reply.parsed.reasoning.empty()) message["reasoning_content"] = reply.parsed.reasoning;
  if (reply.parsed.tool_calls.empty()) {
    message["content"] = reply.parsed.content;
  } else {
    message["content"] = reply.parsed.content.empty() ? json(nullptr) : json(reply.parsed.content);
    json calls = tool_calls_json(reply.parsed.tool_calls);
    for (json& c : calls) c.erase("index");
    message["tool_calls"] = calls;
  }
  return {{"id", m.id},
          {"object", "chat.completion"},
          {"created", m.created},
          {"model", m.model},
          {"system_fingerprint", "channel"},
          {"choices", json::array({{{"index", 0},
                                    {"message", message},
                                    {"logprobs", logprobs},
                                    {"finish_reason", openai_finish(reply.finish)}}})},
          {"usage", usage_json(m.prompt_tokens, static_cast<uint64_t>(reply.n_tokens))}};
}

json chat_chunk(const ResponseMeta& m, const json& delta, const json& finish_reason,
                const json& logprobs) {
  return {{"id", m.id},
          {"object", "chat.completion.chunk"},
          {"created", m.created},
          {"model", m.model},
          {"system_fingerprint", "channel"},
          {"choices", json::array({{{"index", 0},
                                    {"delta", delta},
                                    {"logprobs", logprobs},
                                    {"finish_reason", finish_reason}}})}};
}

json StreamedLogprobs::take(size_t end) {
  if (top_ < 0) return nullptr;
  size_t k = sent_;
  while (k < entries_.size() && entries_[k].offset < end) ++k;
  const std::span<const ReplyLogprob> part(entries_.data() + sent_, k - sent_);
  sent_ = k;
  return chat_ ? chat_logprobs(tok_, part, end) : completion_logprobs(tok_, part, end, base_);
}

json StreamedLogprobs::rest(size_t text_end) {
  if (top_ < 0 || sent_ == entries_.size() || entries_[sent_].offset >= text_end) return nullptr;
  return take(text_end);
}

std::string sse(const json& data) {
  return "data: " + data.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

std::string sse_error(const std::string& message) {
  return sse(ApiError(500, message).to_json());
}

}  // namespace channel::server
