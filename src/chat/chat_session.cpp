// ChatSession (chat_session.h): cold boot into the anchors, turns as typed spans, replies
// with stop strings and interrupts, memory recall at each user turn.
#include "chat/chat_session.h"

#include <algorithm>
#include <chrono>

#include "chat/reasoning_split.h"
#include "memory/text_cue.h"
#include "model/model.h"
#include "runtime/session_file.h"
#include "util/error.h"

namespace channel {

ChatSession::ChatSession(std::shared_ptr<const Model> model, ChatConfig config)
    : ChatSession(model, std::move(config), nullptr) {}

ChatSession::ChatSession(std::shared_ptr<const Model> model, ChatConfig config,
                         std::unique_ptr<StreamSession> resumed)
    : model_(std::move(model)), config_(std::move(config)) {
  formatter_ = make_chat_formatter(config_.chat_template);
  // The store is opened before anything else: a store of another model stops here.
  if (!config_.memory_path.empty()) {
    store_ = std::make_unique<EpisodicStore>(
        open_or_create_store(config_.memory_path, *model_, config_.memory_capacity, 64));
  }
  if (resumed) {
    stream_ = std::move(resumed);
    formatter_->resume_after_reply();
  } else {
    // Automatic recall probes a turn's last token: one slot of the window stays free for it.
    RingSessionConfig ring = config_.ring;
    if (store_ && config_.auto_recall) ring.ring.probe_reserve = std::max<uint32_t>(ring.ring.probe_reserve, 1);
    stream_ = std::make_unique<StreamSession>(model_, ring, config_.sampling);
    ChatOutput anchors;
    const bool has_system = !config_.system.text.empty();
    formatter_->open(has_system ? std::optional<std::string>(config_.system.text) : std::nullopt,
                     config_.system.tools, anchors);
    feed(anchors, /*anchors=*/true);
    stream_->seal();
  }
  attach_memory();
}

std::unique_ptr<ChatSession> ChatSession::load(std::shared_ptr<const Model> model,
                                               ChatConfig config, const std::string& path) {
  auto stream = load_session_file(path, model, config.ring);
  return std::unique_ptr<ChatSession>(new ChatSession(model, std::move(config), std::move(stream)));
}

ChatSession::~ChatSession() {
  recall_.reset();  // stops its background thread before the attachment goes
  stream_->sampler().set_logit_bias({});  // it points into the attachment
  memory_.reset();  // flushes staged episodes while the ring still exists
}

void ChatSession::attach_memory() {
  if (!store_) return;
  MemoryConfig mc;
  const Tokenizer* tok = &model_->tokenizer();
  mc.summarize = [tok](std::span<const int32_t> t) { return tok->decode(t); };
  mc.query_threads = std::max(1, config_.ring.n_threads);
  mc.copy.bias = config_.recall_copy;
  memory_ = std::make_unique<MemoryAttachment>(stream_->ring_session(), *store_, mc);
  stream_->sampler().set_logit_bias(
      [m = memory_.get()](size_t n, std::vector<LogitEdit>& e) { m->recalled_bonus(n, e); });
  if (!config_.auto_recall || config_.recall.k == 0 ||
      stream_->ring_session().ring().config().n_recall == 0)
    return;
  recall_ = std::make_unique<AutoRecall>(*memory_, config_.recall);
  recall_->set_listener([this](const RecallEvent& e) {
    if (e.hits.empty()) return;
    last_recalls_.clear();
    for (const RecallHit& h : e.hits) {
      RecallNote note;
      note.episode_id = h.episode_id;
      note.score = h.score;
      note.reason = recall_reason_name(e.reason);
      note.cue = e.reason == RecallReason::turn ? pending_cue_ : std::string("the state moved");
      try {
        note.summary = store_->read(h.episode_id).summary;
      } catch (const Error&) {
      }
      last_recalls_.push_back(std::move(note));
    }
  });
}

void ChatSession::feed(const ChatOutput& out, bool anchors) {
  const Tokenizer& tok = model_->tokenizer();
  for (const ChatSegment& seg : out.segments()) {
    const std::vector<int32_t> ids = tok.encode(seg.text, /*add_bos=*/false, /*parse_special=*/true);
    if (ids.empty()) continue;
    if (anchors || seg.type == SpanType::tool_call || seg.type == SpanType::turn_end) {
      stream_->append(seg.type, ids);  // one span: a call or an end of turn is never cut
    } else {
      stream_->feed(seg.type, ids);  // text: cut into spans at sentence ends
    }
  }
}

void ChatSession::feed_turn(const ChatOutput& out, std::string_view text) {
  if (!recall_ || out.empty()) {
    feed(out, false);
    return;
  }
  const std::vector<ChatSegment>& segs = out.segments();
  ChatOutput head;
  for (size_t i = 0; i + 1 < segs.size(); ++i) head.add(segs[i].type, segs[i].text);
  feed(head, false);
  const ChatSegment& last = segs.back();
  const std::vector<int32_t> ids = model_->tokenizer().encode(last.text, false, true);
  std::vector<float> centroid;
  if (recall_->method() == RecallMethod::centroid || recall_->method() == RecallMethod::hybrid)
    centroid = text_cue(*model_, text, std::max(1, config_.ring.n_threads));
  pending_cue_ = std::string(text.substr(0, 200));
  feed_turn_with_recall(*stream_, *recall_, ids, last.type, std::move(centroid));
}

void ChatSession::add_user(std::string_view text) {
  ChatMessage m;
  m.role = ChatRole::user;
  m.content = std::string(text);
  ChatOutput out;
  formatter_->add(m, out);
  feed_turn(out, text);
}

void ChatSession::add_tool_result(std::string_view name, std::string_view content) {
  ChatMessage m;
  m.role = ChatRole::tool;
  m.name = std::string(name);
  m.content = std::string(content);
  ChatOutput out;
  formatter_->add(m, out);
  feed_turn(out, content);
}

void ChatSession::add_assistant(const ChatMessage& message) {
  ChatOutput out;
  formatter_->add(message, out);
  feed(out, false);
  ++turns_;
}

std::string ChatSession::tool_marker() const {
  if (config_.system.tools.empty()) return "";
  std::string marker(trim_whitespace(formatter_->tool_call_opener("")));
  return marker.substr(0, std::min(marker.find('\n'), marker.find("\": ")));
}

ChatReply ChatSession::reply(const ReplyOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  ChatOutput prompt;
  formatter_->generation_prompt(prompt);
  feed(prompt, false);

  const std::vector<std::string> template_stops = formatter_->stop_strings();
  ReplyOptions o = options;
  if (recall_) {
    AutoRecall* r = recall_.get();
    o.between_tokens = [r] { (void)r->poll(); };  // a background recall lands between tokens
  }
  if (!config_.system.tools.empty()) {
    o.tool_marker = tool_marker();  // from there the reply is a tool_call span
    o.prefix_is_call = !o.prefix.empty();
  }
  const GenerationResult g = run_generation(*stream_, o, template_stops);
  ChatReply r;
  r.text = g.text;
  r.finish = g.finish;
  r.stop_string = g.stop_string;
  r.n_tokens = g.n_tokens;
  const bool template_stop = g.template_stop;
  // Close the turn as the template writes it: the end-of-turn token (not fed when it was
  // sampled, and missing after a limit or an interrupt), then what follows it.
  ChatOutput close;
  if (!template_stop) close.add(SpanType::turn_end, formatter_->end_of_turn());
  close.add(SpanType::turn_end, formatter_->end_generated_reply());
  feed(close, false);
  ++turns_;
  if (memory_) memory_->cut();

  // A thinking model's leading <think> block is its reasoning; calls and content follow it.
  const SplitReply split = split_reasoning(r.text);
  r.parsed = parse_tool_calls(config_.chat_template.family, split.content, config_.system.tools);
  r.parsed.reasoning = split.reasoning;
  if (!r.parsed.tool_calls.empty() && r.finish == FinishReason::stop) r.finish = FinishReason::tool_calls;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

void ChatSession::save(const std::string& path) const {
  if (memory_) memory_->flush();
  save_session_file(path, *stream_);
}

ChatStats ChatSession::stats() const {
  ChatStats s;
  const SlotRing& ring = stream_->ring_session().ring();
  s.clock = ring.clock();
  s.n_slots = ring.config().n_slots;
  s.anchors = ring.n_sys();
  s.window_live = ring.window_live();
  s.window_capacity = ring.window_capacity();
  s.recall_slots = ring.config().n_recall;
  s.recall_used = ring.recall_used();
  s.recall_episodes = static_cast<uint32_t>(ring.recall_episodes().size());
  s.anchor_spans = ring.anchor_spans().size();
  s.window_spans = ring.window_span_count();
  s.evicted_spans = ring.evicted_spans();
  s.turns = turns_;
  if (memory_) {
    s.memory = true;
    const MemoryStats ms = memory_->stats();
    s.episodes_stored = store_->live_count();
    s.episodes_written = ms.worker.written;
    s.recalls = ms.recalls;
  }
  return s;
}

}  // namespace channel
