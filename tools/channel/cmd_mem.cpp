// `channel mem`: inspect an .episodic.mem store (ls, show, stats, verify: no model needed),
// act on its episodes (rm, pin, unpin, repair), and with a model create one, add a text as
// an episode, and query it by a text cue (add and query run the model where --device says).
// The read-only commands (ls, show, stats, verify, query) take no lock: they work while
// another process writes the store.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/cpu/thread_pool.h"
#include "backend/device.h"
#include "cli_common.h"
#include "cli_errors.h"
#include "cli_files.h"
#include "command.h"
#include "embedded_model.h"
#include "gguf/model_signature.h"
#include "memory/auto_recall.h"
#include "memory/consolidation.h"
#include "memory/episodic_repair.h"
#include "memory/episodic_store.h"
#include "memory/episodic_view.h"
#include "memory/memory_attachment.h"
#include "memory/retrieval_features.h"
#include "memory/retrieval_head.h"
#include "memory/text_cue.h"
#include "model/model.h"
#include "model/ring_compute.h"
#include "runtime/stream_session.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

#if defined(CHANNEL_HAS_CUDA)
#include "backend/cuda/cuda_ring.h"
#include "backend/cuda/cuda_session.h"
#include "runtime/cuda_context_session.h"
#endif

namespace channel::cli {
namespace {

struct MemArgs {
  std::string file;
  uint64_t id = 0;
  std::string model;
  int threads = 1;
  std::string device = "cpu";  // add, query: where the model runs
  std::string text;
  size_t k = 5;
  uint32_t capacity = kDefaultStoreCapacity;
  uint32_t max_tokens = 64;
  bool q8_0 = false;
  bool json = false;  // ls, query: one JSON object per line
  bool dry_run = false;  // repair: report only
  std::string method = "auto";  // query: --recall-method
  double lexical = kDefaultLexicalWeight;  // query: --recall-lexical
  bool v1 = false;               // create: version 1 (no retrieval section)
  bool v2 = false;               // create: version 2 (no lexical section)
};

// Episode ids are unsigned 64-bit: "-1" or "x" is refused, never wrapped around.
CLI::Validator episode_id() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const bool digits = !text.empty() && text.size() <= 20 &&
                            text.find_first_not_of("0123456789") == std::string::npos;
        if (!digits || (text.size() == 20 && text > "18446744073709551615"))
          return fmt::format("'{}' is not an episode id (allowed: 0..18446744073709551615)", text);
        return {};
      },
      "");
}

// One JSON line; invalid UTF-8 in a summary (a cut multi-byte character) becomes U+FFFD.
void print_json_line(const nlohmann::ordered_json& j) {
  std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

std::string one_line(std::string_view s, size_t max_bytes);

std::shared_ptr<const Model> load_model(const std::string& path) {
  if (!path.empty()) return Model::load(path);
  const auto embedded = embedded_model();
  if (embedded.empty()) throw Error("no model given (-m) and this build has no built-in model");
  return Model::load_from_memory(embedded, "(built-in model)");
}

EpisodicStore open_for_model(const std::string& path, const Model& model, bool read_only) {
  StoreOptions o;
  o.read_only = read_only;
  o.model_hash = model_id_hash(model.gguf());
  return EpisodicStore::open(path, o);
}

int run_create(const MemArgs& a) {
  const auto model = load_model(a.model);
  StoreGeometry g = session_store_geometry(*model, a.capacity, a.max_tokens);
  g.slab_type = a.q8_0 ? SlabType::q8_0 : SlabType::f16;
  if (a.v1) g.ext_kinds = 0;
  if (a.v1 || a.v2) g.lexical = false;
  const EpisodicStore s = EpisodicStore::create(a.file, g, model_id_hash(model->gguf()));
  std::printf("created %s: %u episodes of up to %u tokens, %s slabs, %s when full\n",
              a.file.c_str(), g.max_episodes, g.max_tokens, slab_type_name(g.slab_type),
              format_bytes(s.layout().file_size).c_str());
  return 0;
}

// Where `mem add` and `mem query` run the model (--device): the ring's forward, and the
// final-norm rows of a text (every token, BOS included) for a centroid cue. Empty: the CPU.
// On CUDA both come from one upload of the model.
struct MemCompute {
  RingComputeFactory ring;
  std::function<std::vector<float>(const std::vector<int32_t>&)> hidden;
};

MemCompute mem_compute(const std::shared_ptr<const Model>& model, const std::string& name,
                       int threads) {
  const DeviceSpec device = parse_device(name);
  MemCompute c;
  if (!device.is_cuda()) return c;
#if defined(CHANNEL_HAS_CUDA)
  std::shared_ptr<const cuda::CudaWeights> weights = cuda::CudaWeights::upload(model, device.index);
  std::fprintf(stderr, "channel: running on %s (%s)\n", device.name().c_str(),
               weights->device_name().c_str());
  c.ring = cuda::ring_compute(weights);
  c.hidden = [weights, threads](const std::vector<int32_t>& tokens) {
    CudaContextSession context(weights, static_cast<int>(tokens.size()), threads);
    std::vector<float> rows;
    context.hidden_states(tokens, rows);
    return rows;
  };
#else
  throw_no_cuda_backend(name);
#endif
  return c;
}

// The unit centroid of a text's hidden states, as encode_text gives them (a leading BOS run
// but left out), computed where `compute` says.
std::vector<float> text_centroid(const Model& model, const std::string& text,
                                 const MemCompute& compute, int threads) {
  const size_t dim = static_cast<size_t>(model.hparams().n_embd);
  if (!compute.hidden) return centroid_of(encode_text(model, text, threads).hidden, dim);
  const Tokenizer& tok = model.tokenizer();
  const std::vector<int32_t> all = tok.encode(text, tok.add_bos_default(), true);
  const size_t skip = !all.empty() && all[0] == tok.bos_id() ? 1 : 0;
  if (all.size() <= skip) throw Error("mem: the text has no tokens");
  const std::vector<float> rows = compute.hidden(all);
  return centroid_of(std::span<const float>(rows).subspan(skip * dim), dim);
}

// A fresh session of `model` whose anchors are BOS (when the model adds one): where `mem add`
// and `mem query` run a text, as a prompt is run.
std::unique_ptr<StreamSession> text_session(const std::shared_ptr<const Model>& model,
                                            size_t n_tokens, int threads,
                                            const RingComputeFactory& compute) {
  const Tokenizer& tok = model->tokenizer();
  RingSessionConfig rc;
  rc.ring.n_slots =
      static_cast<uint32_t>(std::max<size_t>(SlotGeometry::kDefaultSlots, n_tokens * 2 + 256));
  rc.ring.n_recall = 0;
  rc.n_threads = threads;
  rc.compute = compute;
  auto ss = std::make_unique<StreamSession>(model, rc, SamplerConfig{});
  if (tok.add_bos_default() && tok.bos_id() >= 0) {
    const int32_t bos = tok.bos_id();
    ss->append(SpanType::system, {&bos, 1});
  }
  ss->seal();
  return ss;
}

// The text runs in a fresh session (BOS, then the text as one user span) with the store
// attached, and is consolidated as one episode by the same path a live session takes: the
// centroid, and for a version 2 store the representative keys chosen by the text's own
// attention and the retrieval head's vectors.
int run_add(const MemArgs& a) {
  const auto model = load_model(a.model);
  EpisodicStore s = open_for_model(a.file, *model, false);
  const Tokenizer& tok = model->tokenizer();
  const std::vector<int32_t> ids = tok.encode(a.text, false, true);
  if (ids.empty()) throw Error("mem add: the text has no tokens");
  if (ids.size() > s.layout().max_tokens) {
    throw_error("mem: the text is {} tokens; the store takes at most {} per episode", ids.size(),
                s.layout().max_tokens);
  }
  const MemCompute compute = mem_compute(model, a.device, a.threads);
  const auto ss = text_session(model, ids.size(), a.threads, compute.ring);
  MemoryConfig mc;
  mc.staging.capacity = s.layout().max_tokens;
  mc.summarize = [&tok](std::span<const int32_t> t) { return tok.decode(t); };
  mc.query_threads = a.threads;
  WorkerStats st;
  {
    MemoryAttachment mem(ss->ring_session(), s, mc);
    ss->append(SpanType::user, ids);
    mem.consolidate_window();
    st = mem.stats().worker;
  }
  if (st.failed > 0 || st.written != 1)
    throw_error("mem add: {}: the episode was not written: {}", a.file,
                st.last_error.empty() ? "nothing was staged" : st.last_error);
  std::printf("%llu\n", static_cast<unsigned long long>(st.last_episode_id));
  return 0;
}

// Top-k by a method that scores the cue's last token (keys, proj, hybrid): the cue runs in a
// fresh session of the model as a prompt would (BOS, then the text as a user turn) and the
// state of its last token is the cue, as automatic recall takes it.
std::vector<RecallHit> query_by_state(const std::shared_ptr<const Model>& model, EpisodicStore& s,
                                      const MemArgs& a, RecallMethod m,
                                      const std::vector<float>& centroid,
                                      const MemCompute& compute) {
  const Tokenizer& tok = model->tokenizer();
  const std::vector<int32_t> ids = tok.encode(a.text, false, true);
  if (ids.empty()) throw Error("mem query: the cue has no tokens");
  const auto ss = text_session(model, ids.size(), a.threads, compute.ring);
  MemoryConfig mc;
  mc.consolidate = false;
  mc.query_threads = a.threads;
  MemoryAttachment mem(ss->ring_session(), s, mc);
  ss->feed(SpanType::user, ids);
  CueState cue = mem.current_cue();
  cue.centroid = centroid;
  return mem.query_state(cue, m, a.k, true, static_cast<float>(a.lexical));
}

int run_query(const MemArgs& a) {
  const auto model = load_model(a.model);
  EpisodicStore s = open_for_model(a.file, *model, true);
  const auto method = parse_recall_method(a.method);
  const MemCompute compute = mem_compute(model, a.device, a.threads);
  const std::vector<float> q = text_centroid(*model, a.text, compute, a.threads);
  ThreadPool pool(a.threads);
  std::vector<RecallHit> hits;
  RecallMethod used = RecallMethod::centroid;
  if (*method == RecallMethod::centroid ||
      (*method == RecallMethod::automatic && s.layout().ext_kinds == 0)) {
    hits = s.query(q, a.k, &pool);
  } else {
    const bool proj_ok = s.layout().has_proj() && load_retrieval_head(model->gguf(),
                                                                      q.size()).has_value();
    used = *method != RecallMethod::automatic ? *method
           : proj_ok                          ? RecallMethod::proj
           : s.layout().has_keys()            ? RecallMethod::keys
                                              : RecallMethod::centroid;
    hits = used == RecallMethod::centroid ? s.query(q, a.k, &pool)
                                          : query_by_state(model, s, a, used, q, compute);
  }
  const char* score_name = used == RecallMethod::centroid ? "cosine" : "score";
  if (!a.json) std::printf("%4s %8s %8s  %s\n", "rank", "id", score_name, "summary");
  int rank = 1;
  for (const RecallHit& h : hits) {
    std::string summary;
    bool damaged = false;
    try {
      summary = s.read(h.episode_id).summary;
    } catch (const EpisodeReplaced&) {
      continue;  // a writer evicted it since this query began
    } catch (const Error&) {
      damaged = true;
    }
    if (a.json) {
      nlohmann::ordered_json j = {{"rank", rank++}, {"id", h.episode_id}};
      j[score_name] = h.score;
      j["method"] = recall_method_name(used);
      if (damaged) j["damaged"] = true;
      j["summary"] = summary;
      print_json_line(j);
      continue;
    }
    if (damaged) summary = "(damaged record: run 'channel mem verify')";
    std::printf("%4d %8llu %8.4f  %s\n", rank++, static_cast<unsigned long long>(h.episode_id),
                h.score, one_line(summary, 60).c_str());
  }
  return 0;
}

EpisodicStore open_ro(const std::string& path) {
  StoreOptions o;
  o.read_only = true;
  return EpisodicStore::open(path, o);
}

std::string flag_letters(uint16_t f) {
  std::string s;
  s += (f & kEpisodePinned) ? 'P' : '-';
  s += (f & kEpisodeInterrupted) ? 'I' : '-';
  s += (f & kEpisodeHasTool) ? 'T' : '-';
  return s;
}

// Control characters become spaces so that one episode stays on one line.
std::string one_line(std::string_view s, size_t max_bytes) {
  std::string out(utf8_prefix(s, max_bytes));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  if (out.size() < s.size()) out += "...";
  return out;
}

std::string parent_text(uint64_t p) {
  return p == kNoEpisode ? "-" : std::to_string(p);
}

int run_ls(const MemArgs& a) {
  const EpisodicStore s = open_ro(a.file);
  if (!a.json)
    std::printf("%8s %12s %6s %9s %8s %5s  %s\n", "id", "start_clock", "tokens", "salience",
                "accesses", "flags", "summary");
  for (const EpisodeHeader& h : s.list()) {
    std::string summary;
    bool damaged = false;
    try {
      summary = s.read(h.episode_id).summary;
    } catch (const EpisodeReplaced&) {
      continue;  // a writer evicted it since this listing began
    } catch (const Error&) {
      damaged = true;
    }
    if (a.json) {
      nlohmann::ordered_json j = {{"id", h.episode_id},
                                  {"parent", h.parent_episode_id == kNoEpisode
                                                 ? nlohmann::ordered_json(nullptr)
                                                 : nlohmann::ordered_json(h.parent_episode_id)},
                                  {"start_clock", h.start_clock},
                                  {"tokens", h.token_count},
                                  {"salience", h.salience_norm},
                                  {"accesses", h.access_count},
                                  {"last_accessed_ms", h.last_accessed},
                                  {"flags", flag_letters(h.flags)}};
      if (damaged) j["damaged"] = true;
      j["summary"] = summary;
      print_json_line(j);
      continue;
    }
    if (damaged) summary = "(damaged record: run 'channel mem verify')";
    std::printf("%8llu %12llu %6u %9.3f %8u %5s  %s\n",
                static_cast<unsigned long long>(h.episode_id),
                static_cast<unsigned long long>(h.start_clock), h.token_count, h.salience_norm,
                h.access_count, flag_letters(h.flags).c_str(), one_line(summary, 60).c_str());
  }
  return 0;
}

int run_show(const MemArgs& a) {
  const EpisodicStore s = open_ro(a.file);
  const Episode e = s.read(a.id);
  const EpisodeHeader& h = e.header;
  std::printf("episode            %llu (slot %u)\n", static_cast<unsigned long long>(h.episode_id),
              e.slot);
  std::printf("parent             %s\n", parent_text(h.parent_episode_id).c_str());
  std::printf("children           %u\n", h.child_count);
  std::printf("created            %s\n", format_time_ms(h.created_timestamp).c_str());
  std::printf("last_accessed      %s\n", format_time_ms(h.last_accessed).c_str());
  std::printf("accesses           %u\n", h.access_count);
  std::printf("start_clock        %llu\n", static_cast<unsigned long long>(h.start_clock));
  std::printf("tokens             %u\n", h.token_count);
  std::printf("salience           %.6f\n", h.salience_norm);
  if (h.continuation_token == kNoContinuation) {
    std::printf("continuation       -\n");
  } else {
    std::printf("continuation       %u\n", h.continuation_token);
  }
  std::printf("flags              %s\n", flag_letters(h.flags).c_str());
  std::printf("summary            %s\n", one_line(e.summary, kSummaryMax).c_str());
  std::printf("token ids          [");
  for (size_t i = 0; i < e.tokens.size(); ++i) std::printf("%s%d", i ? "," : "", e.tokens[i]);
  std::printf("]\n");
  double cn = 0;
  for (float c : e.centroid) cn += static_cast<double>(c) * c;
  std::printf("centroid norm      %.6f\n", std::sqrt(cn));
  const StoreLayout& L = s.layout();
  const size_t n = h.token_count;
  for (uint32_t l = 0; l < L.num_layers; ++l) {
    double k2 = 0, v2 = 0;
    for (size_t i = 0; i < n * L.kv_dim; ++i) {
      const float k = e.kv[(2ull * l) * n * L.kv_dim + i],
                  v = e.kv[(2ull * l + 1) * n * L.kv_dim + i];
      k2 += static_cast<double>(k) * k;
      v2 += static_cast<double>(v) * v;
    }
    std::printf("layer %-4u         |K| %.4f  |V| %.4f\n", l, std::sqrt(k2), std::sqrt(v2));
  }
  std::printf("checksum           ok\n");
  return 0;
}

int run_stats(const MemArgs& a) {
  const EpisodicStore s = open_ro(a.file);
  const FileHeader h = s.header();
  const StoreLayout& L = s.layout();
  const auto eps = s.list();
  uint64_t tokens = 0, pinned = 0, accesses = 0;
  double salience = 0;
  for (const EpisodeHeader& e : eps) {
    tokens += e.token_count;
    pinned += (e.flags & kEpisodePinned) != 0;
    accesses += e.access_count;
    salience += e.salience_norm;
  }
  std::printf("file               %s\n", a.file.c_str());
  std::printf("file size          %s (allocated sparsely)\n", format_bytes(L.file_size).c_str());
  std::printf("version            %u\n", L.version);
  std::string retrieval = L.ext_kinds ? "" : "none (recall by centroid only)";
  if (L.has_keys()) retrieval += fmt::format("keys (R {} per KV head)", L.keys_per_head);
  if (L.has_proj())
    retrieval += fmt::format("{}projected vectors (d_r {})", L.has_keys() ? ", " : "", L.proj_dim);
  std::printf("retrieval          %s\n", retrieval.c_str());
  std::printf("lexical index      %s\n", L.has_lexical() ? "stored (lexical section)"
                                                          : "built from the records when recalled");
  std::printf("slab type          %s\n", slab_type_name(L.slab_type));
  std::printf("layers             %u\n", L.num_layers);
  std::printf("hidden size        %u\n", L.hidden_size);
  std::printf("kv dim             %u\n", L.kv_dim);
  std::printf("max tokens/episode %u\n", L.max_tokens);
  std::printf("capacity           %u episodes\n", L.max_episodes);
  std::printf("live episodes      %zu (%llu pinned)\n", eps.size(),
              static_cast<unsigned long long>(pinned));
  std::printf("total published    %llu\n", static_cast<unsigned long long>(h.total_episodes));
  std::printf("write head         %llu\n", static_cast<unsigned long long>(h.write_head));
  std::printf("model id hash      %016llx\n", static_cast<unsigned long long>(h.model_id_hash));
  std::printf("tokens stored      %llu\n", static_cast<unsigned long long>(tokens));
  std::printf("recalls            %llu\n", static_cast<unsigned long long>(accesses));
  std::printf("mean salience      %.4f\n",
              eps.empty() ? 0.0 : salience / static_cast<double>(eps.size()));
  std::printf("index entry        %s\n", format_bytes(L.entry_bytes).c_str());
  std::printf("slab block         %s\n", format_bytes(L.block_stride).c_str());
  return 0;
}

// verify maps the raw bytes itself: a file whose header is bad must still be reported.
int run_verify(const MemArgs& a) {
  const int fd = ::open(a.file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_error("episodic: {}: open failed: {}", a.file, std::strerror(errno));
  std::unique_ptr<int, void (*)(int*)> closer(new int(fd), [](int* p) {
    ::close(*p);
    delete p;
  });
  struct stat st;
  if (::fstat(fd, &st) != 0)
    throw_error("episodic: {}: fstat failed: {}", a.file, std::strerror(errno));
  const size_t size = static_cast<size_t>(st.st_size);
  const uint8_t* data = nullptr;
  void* map = nullptr;
  if (size > 0) {
    map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
      throw_error("episodic: {}: mmap failed: {}", a.file, std::strerror(errno));
    data = static_cast<const uint8_t*>(map);
  }
  const VerifyReport r = verify_store(data, size, a.file);
  if (map) ::munmap(map, size);
  for (const std::string& n : r.notes) std::printf("note: %s\n", n.c_str());
  for (const std::string& p : r.problems) std::printf("problem: %s\n", p.c_str());
  if (!r.ok()) {
    std::string damaged;
    for (uint64_t id : r.damaged_episodes) damaged += fmt::format("{}{}", damaged.empty() ? "" : " ", id);
    if (!damaged.empty()) std::printf("damaged episodes: %s\n", damaged.c_str());
    if (!r.damaged_slots.empty())
      std::printf("damaged index slots: %zu\n", r.damaged_slots.size());
    const bool repairable = !r.damaged_episodes.empty() || !r.damaged_slots.empty();
    throw_error("episodic: {}: verify found {} problem(s){}", a.file, r.problems.size(),
                repairable ? fmt::format(" (damaged episodes: {}; 'channel mem repair {}' drops "
                                         "them and keeps the rest)",
                                         damaged.empty() ? "-" : damaged, a.file)
                           : std::string());
  }
  std::printf("ok: %llu live episodes, %llu records checked\n",
              static_cast<unsigned long long>(r.live),
              static_cast<unsigned long long>(r.records_checked));
  return 0;
}

EpisodicStore open_rw(const std::string& path) {
  return EpisodicStore::open(path, StoreOptions{});
}

int run_rm(const MemArgs& a) {
  EpisodicStore s = open_rw(a.file);
  s.remove(a.id);
  std::printf("removed episode %llu; %llu episodes left\n", static_cast<unsigned long long>(a.id),
              static_cast<unsigned long long>(s.live_count()));
  return 0;
}

int run_pin(const MemArgs& a, bool pin) {
  EpisodicStore s = open_rw(a.file);
  s.set_pinned(a.id, pin);
  std::printf("episode %llu %s\n", static_cast<unsigned long long>(a.id),
              pin ? "pinned: appends never evict it" : "unpinned");
  return 0;
}

int run_repair(const MemArgs& a) {
  const RepairReport r = repair_store(a.file, a.dry_run);
  for (const std::string& d : r.dropped)
    std::printf("%s: %s\n", a.dry_run ? "would drop" : "dropped", d.c_str());
  std::printf("%s: %zu damaged record(s) %s, %llu episodes kept\n", a.file.c_str(),
              r.dropped.size(), a.dry_run ? "to drop" : "dropped",
              static_cast<unsigned long long>(r.kept));
  return 0;
}

const CommandRegistrar registrar{
    "mem",
    "Episodic memory stores (.episodic.mem): ls, show, stats, verify, create, add, query, rm, "
    "pin, unpin, repair",
    [](CLI::App& sub) {
      auto args = std::make_shared<MemArgs>();
      sub.require_subcommand(1);
      CLI::App* ls = sub.add_subcommand("ls", "One line per live episode");
      CLI::App* show = sub.add_subcommand("show", "Every field of one episode");
      CLI::App* stats = sub.add_subcommand("stats", "Geometry, occupancy and totals");
      CLI::App* verify = sub.add_subcommand(
          "verify", "Check the header, the index and every record checksum; exit 1 on a problem");
      CLI::App* create = sub.add_subcommand("create", "Create an empty store for a model");
      CLI::App* add =
          sub.add_subcommand("add", "Run TEXT through the model and store it as an episode");
      CLI::App* query =
          sub.add_subcommand("query", "The episodes closest to a text cue (top-k)");
      CLI::App* rm = sub.add_subcommand("rm", "Remove one episode (its slot becomes free)");
      CLI::App* pin = sub.add_subcommand("pin", "Pin an episode: appends never evict it");
      CLI::App* unpin = sub.add_subcommand("unpin", "Unpin an episode");
      CLI::App* repair = sub.add_subcommand(
          "repair",
          "Drop the damaged records (those 'verify' names) and keep the rest; crash-safe, and "
          "no undamaged record is rewritten");
      repair->add_flag("--dry-run", args->dry_run, "Only say what would be dropped");
      for (CLI::App* c : {ls, show, stats, verify, create, add, query, rm, pin, unpin, repair}) {
        c->add_option("FILE", args->file, "The .episodic.mem file")
            ->required()
            ->check(non_empty("an .episodic.mem file"));
      }
      for (CLI::App* c : {show, rm, pin, unpin})
        c->add_option("ID", args->id, "Episode id")->required()->check(episode_id());
      for (CLI::App* c : {create, add, query}) add_model_option(*c, args->model);
      for (CLI::App* c : {add, query}) {
        add_threads_option(*c, args->threads);
        add_device_option(*c, args->device);
        c->add_option("--text", args->text, "The text")->required();
      }
      for (CLI::App* c : {ls, query})
        c->add_flag("--json", args->json, "One JSON object per episode, one per line");
      query->add_option("-k", args->k, "How many episodes")
          ->check(integer_in(1, 1000000))
          ->capture_default_str();
      create->add_option("--capacity", args->capacity, "Episodes the store holds")
          ->check(integer_in(1, 1 << 24))
          ->capture_default_str();
      create->add_option("--max-tokens", args->max_tokens, "Tokens per episode")
          ->check(integer_in(1, 1 << 16))
          ->capture_default_str();
      query
          ->add_option("--recall-method", args->method,
                       "centroid: cosine of the cue's mean hidden state; keys, proj, hybrid: the "
                       "state of the cue's last token, as automatic recall scores; auto: proj, "
                       "keys or centroid, the best the model and store have")
          ->check(CLI::IsMember({"auto", "centroid", "keys", "proj", "hybrid"}))
          ->capture_default_str();
      query
          ->add_option("--recall-lexical", args->lexical,
                       "Weight of the lexical half of recall (names and rare words the cue "
                       "shares with an episode; not with centroid); 0: the model's vectors alone")
          ->check(CLI::Range(0.0, 1000.0))
          ->capture_default_str();
      create->add_flag("--q8_0", args->q8_0, "Store K/V as Q8_0 instead of FP16");
      create->add_flag("--v1", args->v1,
                       "A version 1 store: no retrieval section, recall by centroid only");
      create->add_flag("--v2", args->v2,
                       "A version 2 store: no lexical section, recall builds the lexical index "
                       "from the records (as with stores made before version 3)");
      return [args, ls, show, stats, verify, create, add, rm, pin, unpin, repair] {
        // The file is checked first: a directory or a missing file is one clear line.
        if (create->parsed()) {
          check_output_file("FILE", args->file);
        } else {
          check_input_file("FILE", args->file, "an .episodic.mem file");
        }
        if (rm->parsed()) return run_rm(*args);
        if (pin->parsed()) return run_pin(*args, true);
        if (unpin->parsed()) return run_pin(*args, false);
        if (repair->parsed()) return run_repair(*args);
        if (ls->parsed()) return run_ls(*args);
        if (show->parsed()) return run_show(*args);
        if (stats->parsed()) return run_stats(*args);
        if (verify->parsed()) return run_verify(*args);
        if (create->parsed()) return run_create(*args);
        if (add->parsed()) return run_add(*args);
        return run_query(*args);
      };
    }};

}  // namespace
}  // namespace channel::cli
