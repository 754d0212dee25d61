// ChatSession: a conversation on the slot ring. It owns a StreamSession (the 4096-slot
// geometry by default), the chat template's formatter, the system prompt and its tools, and
// optionally an episodic memory. Cold boot renders the system prompt and the tools with the
// template and prefills them as the anchors (tier 1), where they never leave; every turn
// after that is rendered by the template and appended as spans of its type (user,
// response_sentence, tool_call, tool_result, turn_end), so the window evicts whole turns
// and sentences and the conversation never hits a context limit. `channel chat` and
// `channel serve` are built on it.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_formatter.h"
#include "chat/generation_loop.h"
#include "chat/system_prompt.h"
#include "chat/tool_call_parser.h"
#include "memory/auto_recall.h"
#include "memory/memory_attachment.h"
#include "runtime/stream_session.h"

namespace channel {

struct ChatConfig {
  RingSessionConfig ring;
  SamplerConfig sampling;
  ChatTemplateSpec chat_template;
  SystemPrompt system;
  // --memory FILE: an episodic store attached to the ring; the episodes closest to each user
  // message are recalled into tier 3 before it is fed, what leaves the window is stored.
  std::string memory_path;
  uint32_t memory_capacity = 4096;
  // Automatic recall (memory/auto_recall.h) at every turn boundary (each user message and
  // tool result) and, with recall.velocity_factor, when the hidden state moves sharply; off
  // when auto_recall is false or recall.k is 0.
  bool auto_recall = true;
  AutoRecallConfig recall;
  // Recall copy's logit bonus (memory/recall_copy.h); 0: off.
  float recall_copy = kDefaultRecallCopyBias;
};

struct ChatReply {
  std::string text;    // the reply as generated (stop string cut off)
  ParsedReply parsed;  // text split into content and tool calls
  FinishReason finish = FinishReason::stop;
  std::string stop_string;  // the request's stop string that ended it ("" when none did)
  int n_tokens = 0;
  double seconds = 0.0;
};

// What one automatic recall brought back, for /memory and the web view.
struct RecallNote {
  uint64_t episode_id = 0;
  float score = 0.0f;
  std::string summary;
  std::string cue;     // the turn it was recalled for (or "velocity": the state moved)
  std::string reason;  // turn, velocity
};

struct ChatStats {
  uint64_t clock = 0;
  uint32_t n_slots = 0, anchors = 0, window_live = 0, window_capacity = 0;
  uint32_t recall_slots = 0, recall_used = 0, recall_episodes = 0;
  uint64_t anchor_spans = 0, window_spans = 0, evicted_spans = 0;
  uint64_t turns = 0;
  bool memory = false;
  uint64_t episodes_stored = 0, episodes_written = 0, recalls = 0;
};

class ChatSession {
 public:
  // Cold boot: the anchors are the rendered system prompt and tools.
  ChatSession(std::shared_ptr<const Model> model, ChatConfig config);
  // Resumes a conversation saved with save() (session file, runtime/session_file.h).
  static std::unique_ptr<ChatSession> load(std::shared_ptr<const Model> model, ChatConfig config,
                                           const std::string& path);
  ~ChatSession();

  void add_user(std::string_view text);
  void add_tool_result(std::string_view name, std::string_view content);
  // Appends a whole assistant turn that was not generated here (an API client's history).
  void add_assistant(const ChatMessage& message);
  // Generates the assistant's reply to what was added since the last one.
  ChatReply reply(const ReplyOptions& options);

  void save(const std::string& path) const;
  ChatStats stats() const;
  std::vector<RecallNote> last_recalls() const { return last_recalls_; }
  const ChatConfig& config() const { return config_; }
  StreamSession& stream() { return *stream_; }
  const StreamSession& stream() const { return *stream_; }
  const ChatFormatter& formatter() const { return *formatter_; }
  // The text a tool call opens with, up to its tool's name ("<tool_call>", "[TOOL_CALLS]",
  // ...): from there a reply is a call. "" when the chat has no tools.
  std::string tool_marker() const;
  MemoryAttachment* memory() { return memory_.get(); }
  const EpisodicStore* store() const { return store_.get(); }

 private:
  ChatSession(std::shared_ptr<const Model> model, ChatConfig config,
              std::unique_ptr<StreamSession> resumed);
  void attach_memory();
  void feed(const ChatOutput& out, bool anchors);
  // Feeds a rendered turn; its last segment is fed with the turn-boundary recall (the
  // recall lands before the turn's last token is computed, so the reply sees it).
  void feed_turn(const ChatOutput& out, std::string_view text);
  std::string end_of_turn_text() const;

  std::shared_ptr<const Model> model_;
  ChatConfig config_;
  std::unique_ptr<ChatFormatter> formatter_;
  std::unique_ptr<StreamSession> stream_;
  std::unique_ptr<EpisodicStore> store_;
  std::unique_ptr<MemoryAttachment> memory_;
  std::unique_ptr<AutoRecall> recall_;
  std::vector<RecallNote> last_recalls_;
  std::string pending_cue_;  // the text of the turn being fed with its recall
  uint64_t turns_ = 0;
};

}  // namespace channel
