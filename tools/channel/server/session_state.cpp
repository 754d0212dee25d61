// Ring and memory state as JSON (session_state.h).
#include "server/session_state.h"

#include "memory/episodic_store.h"

namespace channel::server {

using nlohmann::json;

json session_state_json(const ChatSession& chat, std::vector<SpanRecord>& previous) {
  const ChatStats st = chat.stats();
  const SlotRing& ring = chat.stream().ring_session().ring();
  json j;
  j["clock"] = st.clock;
  j["template"] = chat.config().chat_template.name;
  j["tools"] = json::array();
  for (const ToolSpec& t : chat.config().system.tools) j["tools"].push_back(t.name);
  j["tiers"] = {{"slots", st.n_slots},
                {"anchors", st.anchors},
                {"window", {{"live", st.window_live}, {"capacity", st.window_capacity}, {"oldest", ring.oldest()}}},
                {"recall", {{"slots", st.recall_slots}, {"used", st.recall_used}, {"episodes", st.recall_episodes}}}};
  j["evicted_spans"] = st.evicted_spans;
  j["turns"] = st.turns;
  json anchors = json::array();
  for (const SemanticSpan& s : ring.anchor_spans())
    anchors.push_back({{"type", span_type_name(s.span_type)}, {"start", s.start_clock}, {"end", s.end_clock}});
  j["anchor_spans"] = anchors;
  std::vector<SpanRecord> now;
  json window = json::array();
  for (size_t i = 0; i < ring.window_span_count(); ++i) {
    const SemanticSpan& s = ring.window_span(i);
    now.push_back({span_type_name(s.span_type), s.start_clock, s.end_clock});
    window.push_back({{"type", now.back().type}, {"start", s.start_clock}, {"end", s.end_clock}, {"slot", s.start_slot}});
  }
  j["window_spans"] = window;
  json evicted = json::array();
  for (const SpanRecord& p : previous) {
    if (p.end <= ring.oldest()) evicted.push_back({{"type", p.type}, {"start", p.start}, {"end", p.end}});
  }
  j["last_evicted"] = evicted;
  previous = std::move(now);
  json recall = json::array();
  for (const RecallEpisode& e : ring.recall_episodes())
    recall.push_back({{"episode", e.id}, {"slot", e.slot_begin}, {"tokens", e.count}});
  j["recall_episodes"] = recall;
  json mem = {{"attached", st.memory}};
  if (const EpisodicStore* store = chat.store()) {
    mem["episodes_stored"] = st.episodes_stored;
    mem["recalls"] = st.recalls;
    json eps = json::array();
    const std::vector<EpisodeHeader> list = store->list();
    const size_t first = list.size() > 20 ? list.size() - 20 : 0;
    for (size_t i = first; i < list.size(); ++i) {
      std::string summary;
      try {
        summary = store->read(list[i].episode_id).summary;
      } catch (const std::exception&) {
      }
      eps.push_back({{"id", list[i].episode_id}, {"tokens", list[i].token_count},
                     {"recalled", list[i].access_count}, {"summary", summary}});
    }
    mem["episodes"] = eps;
    json last = json::array();
    for (const RecallNote& r : chat.last_recalls())
      last.push_back({{"episode", r.episode_id}, {"score", r.score}, {"summary", r.summary}, {"cue", r.cue}, {"reason", r.reason}});
    mem["last_recalls"] = last;
  }
  j["memory"] = mem;
  return j;
}

}  // namespace channel::server
