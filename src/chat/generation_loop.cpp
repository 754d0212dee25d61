// A reply on a stream (generation_loop.h): stop strings, tool markers and JSON on top of
// generate_stream.
#include "chat/generation_loop.h"

#include <algorithm>

#include "chat/chat_formatter.h"
#include "chat/json_prefix.h"
#include "runtime/generate_stream.h"

namespace channel {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::tool_calls: return "tool_calls";
    case FinishReason::interrupted: return "interrupted";
  }
  return "?";
}

namespace {

// The end of the longest prefix of `text` that is whole UTF-8 characters.
size_t utf8_boundary(const std::string& text, size_t end) {
  while (end > 0 && end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return end;
}

}  // namespace

GenerationResult run_generation(StreamSession& stream, const ReplyOptions& options,
                                std::span<const std::string> template_stops) {
  const Tokenizer& tok = stream.tokenizer();
  if (options.sampling) stream.set_sampler(*options.sampling);
  const bool logprobs = options.logprobs >= 0 && options.logprobs_out;
  struct LogprobsOff {  // the stream's next user does not pay for them
    StreamSession& s;
    ~LogprobsOff() { s.set_logprobs(-1); }
  } logprobs_off{stream};
  stream.set_logprobs(logprobs ? options.logprobs : -1);
  const size_t first_logprob = logprobs ? options.logprobs_out->size() : 0;
  GenerationResult r;
  // In JSON mode the object's end ends the reply; stop strings could cut it apart.
  std::vector<std::string> stops;
  if (!options.json_object) {
    stops.assign(template_stops.begin(), template_stops.end());
    for (const std::string& s : options.stop)
      if (!s.empty()) stops.push_back(s);
  }
  const size_t n_template_stops = options.json_object ? 0 : template_stops.size();
  size_t hold = 0;  // bytes kept back while they may still begin a stop string
  for (const std::string& s : stops) hold = std::max(hold, s.size() - 1);

  bool client_alive = true;
  size_t emitted = 0;
  const auto emit = [&](size_t upto) {
    if (upto > emitted && client_alive && options.on_text) {
      client_alive = options.on_text(std::string_view(r.text).substr(emitted, upto - emitted));
    }
    emitted = std::max(emitted, upto);
  };
  bool in_call = options.prefix_is_call;
  if (!options.prefix.empty()) {
    const std::vector<int32_t> ids = tok.encode(options.prefix, false, true);
    if (in_call) {
      stream.append(SpanType::tool_call, ids);
    } else {
      stream.feed(SpanType::response_sentence, ids);
    }
    r.text = options.prefix;
  }
  JsonPrefix json(options.json_schema.get());
  const auto allowed = [&](int32_t t) {
    if (tok.is_end_of_generation(t)) return json.complete();
    if (tok.is_control(t)) return false;
    JsonPrefix probe = json;
    return probe.push(tok.token_to_piece(t, false));
  };
  StreamGenerateCallbacks on;
  on.before_token = [&] {
    if (options.between_tokens) options.between_tokens();
    return true;
  };
  if (options.json_object) on.allowed = allowed;
  on.span_type = [&] { return in_call ? SpanType::tool_call : SpanType::response_sentence; };
  // Each token's text: the tool marker, the JSON object's end, stop strings, then the text up
  // to what may begin a stop string is streamed. false: the reply ends (r.finish says why).
  on.on_token = [&](const GeneratedToken& g) {
    ++r.n_tokens;
    const size_t before = r.text.size();
    if (logprobs && g.logprobs) options.logprobs_out->push_back({g.token, before, *g.logprobs});
    r.text += g.text;
    if (!in_call && !options.tool_marker.empty()) {
      const size_t m = options.tool_marker.size();
      in_call = r.text.find(options.tool_marker, before >= m ? before - m + 1 : 0) != std::string::npos;
    }
    if (options.json_object) {
      json.push(tok.token_to_piece(g.token, false));
      if (json.complete()) {
        if (options.prefix.empty()) {
          const std::string_view kept = trim_whitespace(r.text);
          const size_t cut = static_cast<size_t>(kept.data() - r.text.data());
          if (logprobs)  // offsets into the trimmed text
            for (size_t i = first_logprob; i < options.logprobs_out->size(); ++i)
              (*options.logprobs_out)[i].offset -= std::min((*options.logprobs_out)[i].offset, cut);
          r.text = std::string(kept);
        }
        if (!options.suffix.empty()) {
          stream.feed(in_call ? SpanType::tool_call : SpanType::response_sentence,
                      tok.encode(options.suffix, false, true));
          r.text += options.suffix;
        }
        r.finish = FinishReason::stop;
        return false;
      }
    }
    size_t cut = std::string::npos, which = 0;
    bool is_template_stop = false;
    for (size_t i = 0; i < stops.size(); ++i) {
      const size_t from = before >= stops[i].size() ? before - stops[i].size() + 1 : 0;
      const size_t at = r.text.find(stops[i], from);
      if (at != std::string::npos && at < cut) {
        cut = at;
        which = i;
        is_template_stop = i < n_template_stops;
      }
    }
    // A template's line-end stop before any text is the model's spacing, not an end.
    if (cut != std::string::npos &&
        !(is_template_stop && trim_whitespace(r.text.substr(0, cut)).empty())) {
      r.text.resize(cut);
      r.finish = FinishReason::stop;
      r.template_stop = is_template_stop;
      if (!is_template_stop) r.stop_string = stops[which];
      return false;
    }
    emit(utf8_boundary(r.text, r.text.size() > hold ? r.text.size() - hold : 0));
    if (!client_alive || (options.interrupt && options.interrupt->load())) {
      r.finish = FinishReason::interrupted;
      return false;
    }
    return true;
  };
  // max_tokens <= 0 generates nothing (generate_stream reads < 0 as no limit).
  const StreamGenerateResult done =
      generate_stream(stream, std::max(options.max_tokens, 0), EogPolicy::stop, on);
  if (done.stop == StopReason::end_of_generation) r.finish = FinishReason::stop;
  emit(r.text.size());
  return r;
}

}  // namespace channel
