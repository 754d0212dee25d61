// Session files: writer, checked reader and the atomic save (layout in docs/formats.md).
#include "runtime/session_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "kv/ring_state_io.h"
#include "util/hash.h"
#include "gguf/model_signature.h"
#include "util/bytes.h"
#include "util/error.h"
#include "util/file.h"

namespace channel {

namespace {

constexpr char kMagic[8] = {'C', 'H', 'A', 'N', 'S', 'E', 'S', 'S'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kHeaderBytes = 64;
constexpr uint32_t kTrailerBytes = 8;         // u32 crc32c, u32 0
constexpr int32_t kMaxRepeatLastN = 1 << 20;  // the sampler reserves this many ids
constexpr uint32_t kSlotLayer = 0;            // KVAR layer kind: K/V rows of slots
constexpr uint32_t kBoundedLayer = 1;         // KVAR layer kind: a bounded layer's ring

constexpr uint32_t tag(const char (&s)[5]) {
  return uint32_t(uint8_t(s[0])) | uint32_t(uint8_t(s[1])) << 8 | uint32_t(uint8_t(s[2])) << 16 |
         uint32_t(uint8_t(s[3])) << 24;
}
constexpr uint32_t kTagRing = tag("RING");
constexpr uint32_t kTagSampler = tag("SMPL");
constexpr uint32_t kTagStream = tag("STRM");
constexpr uint32_t kTagLogits = tag("LOGT");
constexpr uint32_t kTagKv = tag("KVAR");

}  // namespace

// The parts of a RingSession that a session file holds besides its SlotRing.
struct RingSessionFile {
  // The slots of layer il that the next query can read: live global slots in slot order;
  // for a sliding layer the last min(clock, W) tokens' slots, oldest first.
  static void saved_slots(const RingSession& s, const SlotRing& ring, int il,
                          std::vector<uint32_t>& out) {
    out.clear();
    const RingSession::Layer& L = s.layers_[il];
    if (L.sliding) {
      const uint64_t clock = ring.clock();
      const uint64_t from = clock > s.local_->window() ? clock - s.local_->window() : 0;
      for (uint64_t c = from; c < clock; ++c) out.push_back(s.local_->slot_of(c));
    } else {
      for (uint32_t slot = 0; slot < ring.config().n_slots; ++slot)  // recall slots too
        if (ring.slot_live(slot)) out.push_back(slot);
    }
  }

  static void write(const RingSession& s, ByteWriter& w) {
    if (s.tentative_ != 0)
      throw_error(
          "session file: cannot save while a tentative decode_all of {} tokens awaits "
          "truncate_last",
          s.tentative_);
    const ModelHparams& hp = s.model_->hparams();
    const size_t hd = hp.head_dim;
    w.put(s.max_distance_);
    std::vector<uint32_t> slots;
    for (int il = 0; il < hp.n_layer; ++il) {
      if (hp.is_bounded(il)) {  // the whole ring of the last W raw keys/values
        const BoundedState& b = s.bounded_.state(il);
        w.put(static_cast<uint32_t>(b.window())), w.put<uint32_t>(kBoundedLayer);
        w.put(b.seen());
        w.bytes(b.ring_k().data(), b.ring_k().size() * sizeof(float));
        w.bytes(b.ring_v().data(), b.ring_v().size() * sizeof(float));
        continue;
      }
      saved_slots(s, s.ring_, il, slots);
      w.put(static_cast<uint32_t>(slots.size())), w.put<uint32_t>(kSlotLayer);
      // Rows as f32 wherever they live (recall slots are f16 in the session: widened exactly),
      // read in one go (on a device: one copy per run of consecutive slots), written
      // [2][n_head_kv][slots][hd].
      const size_t row = static_cast<size_t>(hp.n_head_kv) * hd;
      std::vector<float> k(slots.size() * row), v(slots.size() * row);
      s.kv_slots(il, slots, k.data(), v.data());
      for (int kv = 0; kv < 2; ++kv)
        for (int h = 0; h < hp.n_head_kv; ++h)
          for (size_t i = 0; i < slots.size(); ++i)
            w.bytes((kv == 0 ? k : v).data() + i * row + h * hd, hd * sizeof(float));
    }
  }

  // Installs `ring` and reads max_distance and the K/V rows from `r` (section KVAR).
  static void read(RingSession& s, SlotRing ring, std::span<const float> logits, ByteReader& r) {
    const ModelHparams& hp = s.model_->hparams();
    const size_t hd = hp.head_dim;
    const auto max_distance = r.get<uint64_t>("max_distance");
    if (max_distance >= ring.config().n_slots)
      r.fail(r.at - 8, fmt::format("max_distance {} is not below n_slots", max_distance));
    // Pass 1 checks every layer's header; pass 2 copies. Nothing changes before pass 2.
    std::vector<uint32_t> slots;
    const size_t rows_at = r.at;
    for (int pass = 0; pass < 2; ++pass) {
      r.at = rows_at;
      for (int il = 0; il < hp.n_layer; ++il) {
        const size_t at = r.at;
        const auto n = r.get<uint32_t>("layer row count");
        const auto kind = r.get<uint32_t>("layer kind");
        if (hp.is_bounded(il)) {
          BoundedState& b = s.bounded_.state(il);
          if (kind != kBoundedLayer || n != static_cast<uint32_t>(b.window()))
            r.fail(at, fmt::format("layer {} is not a bounded ring of {} rows", il, b.window()));
          const auto seen = r.get<uint64_t>("bounded seen");
          if (seen != ring.clock())
            r.fail(r.at - 8, fmt::format("bounded layer {} has seen {} tokens, the clock is {}", il,
                                         seen, ring.clock()));
          const auto k = r.take(b.ring_k().size() * sizeof(float), "bounded ring K");
          const auto v = r.take(b.ring_v().size() * sizeof(float), "bounded ring V");
          if (pass == 1) {
            std::vector<float> kf(b.ring_k().size()), vf(b.ring_v().size());
            std::memcpy(kf.data(), k.data(), k.size());
            std::memcpy(vf.data(), v.data(), v.size());
            b.load_ring(seen, kf, vf);
            s.bounded_dirty_ = true;  // a device reloads its rings before the next forward
          }
          continue;
        }
        saved_slots(s, ring, il, slots);
        if (kind != kSlotLayer || n != slots.size())
          r.fail(at, fmt::format("layer {} holds {} rows of kind {}, the ring state needs {} of "
                                 "kind {}",
                                 il, n, kind, slots.size(), kSlotLayer));
        const size_t bytes = slots.size() * hd * sizeof(float);
        // K rows of every head, then V rows: [2][n_head_kv][slots][hd].
        std::vector<std::span<const uint8_t>> rows;
        for (int i = 0; i < 2 * hp.n_head_kv; ++i) rows.push_back(r.take(bytes, "K/V rows"));
        if (pass == 0) continue;
        // Into [slots][n_head_kv][hd], written in one go (on a device: one copy per run of
        // consecutive slots).
        const size_t row = static_cast<size_t>(hp.n_head_kv) * hd;
        std::vector<float> k(slots.size() * row), v(slots.size() * row);
        for (int h = 0; h < hp.n_head_kv; ++h)
          for (size_t i = 0; i < slots.size(); ++i) {
            std::memcpy(k.data() + i * row + h * hd, rows[h].data() + i * hd * sizeof(float),
                        hd * sizeof(float));
            std::memcpy(v.data() + i * row + h * hd,
                        rows[hp.n_head_kv + h].data() + i * hd * sizeof(float), hd * sizeof(float));
          }
        s.set_kv_slots(il, slots, k.data(), v.data());
      }
      r.expect_end("KVAR");
    }
    s.ring_ = std::move(ring);
    s.max_distance_ = max_distance;
    std::copy(logits.begin(), logits.end(), s.logits_.begin());
  }
};

std::vector<uint8_t> session_to_bytes(const StreamSession& session) {
  const RingSession& rs = session.ring_session();
  const ModelHparams& hp = rs.model().hparams();
  const RingConfig& g = rs.ring().config();
  const std::vector<uint8_t> ring_bytes = save_ring_state(rs.ring());  // throws in a probe
  ByteWriter w;
  w.bytes(kMagic, 8);
  w.put(kVersion), w.put(kHeaderBytes), w.put<uint64_t>(0);  // file_bytes, patched below
  w.put(model_id_hash(rs.model().gguf()));
  w.put(g.n_slots), w.put(g.n_recall), w.put(g.probe_reserve), w.put(g.cut_chunk);
  w.put<uint32_t>(hp.n_layer), w.put<uint32_t>(hp.n_head_kv), w.put<uint32_t>(hp.head_dim);
  w.put<uint32_t>(hp.n_vocab);

  size_t at = w.begin_section(kTagRing);
  w.bytes(ring_bytes.data(), ring_bytes.size());
  w.end_section(at);

  at = w.begin_section(kTagSampler);
  const SamplerConfig& c = session.sampler().config();
  w.put(c.temperature), w.put(c.top_k), w.put(c.top_p), w.put(c.min_p), w.put(c.repeat_penalty);
  w.put(c.repeat_last_n), w.put(c.seed);
  for (uint64_t word : session.sampler().rng().state()) w.put(word);
  const std::vector<int32_t> recent = session.sampler().recent_tokens();
  w.put(static_cast<uint32_t>(recent.size()));
  for (int32_t t : recent) w.put(t);
  w.end_section(at);

  at = w.begin_section(kTagStream);
  const StreamSpanState spans = session.span_state();
  w.put<int8_t>(spans.open ? static_cast<int8_t>(*spans.open) : int8_t{-1});
  w.put<uint8_t>(spans.splitter.fresh);
  w.put(static_cast<uint16_t>(spans.splitter.tail.size()));
  w.bytes(spans.splitter.tail.data(), spans.splitter.tail.size());
  w.end_section(at);

  at = w.begin_section(kTagLogits);
  w.bytes(session.logits().data(), session.logits().size_bytes());
  w.end_section(at);

  at = w.begin_section(kTagKv);
  RingSessionFile::write(rs, w);
  w.end_section(at);

  const uint64_t file_bytes = w.out.size() + kTrailerBytes;
  std::memcpy(w.out.data() + 16, &file_bytes, 8);
  w.put(crc32c(0, w.out.data(), w.out.size()));
  w.put<uint32_t>(0);
  return w.out;
}

std::unique_ptr<StreamSession> session_from_bytes(std::span<const uint8_t> bytes,
                                                  std::string_view what,
                                                  std::shared_ptr<const Model> model,
                                                  const RingSessionConfig& config) {
  ByteReader r{bytes, fmt::format("{}: session file", what)};
  if (bytes.size() < 8 || std::memcmp(bytes.data(), kMagic, 8) != 0)
    r.fail(0, "bad magic (expected CHANSESS)");
  r.at = 8;
  if (const auto v = r.get<uint32_t>("version"); v != kVersion)
    r.fail(8, fmt::format("unsupported version {}", v));
  if (r.get<uint32_t>("header_bytes") != kHeaderBytes) r.fail(12, "bad header size");
  const auto file_bytes = r.get<uint64_t>("file_bytes");
  if (file_bytes != bytes.size())
    r.fail(16, fmt::format("the header says {} bytes but there are {} (truncated or extended)",
                           file_bytes, bytes.size()));
  if (bytes.size() < kHeaderBytes + kTrailerBytes) r.fail(bytes.size(), "truncated");
  const size_t body = bytes.size() - kTrailerBytes;
  uint32_t stored_crc;
  std::memcpy(&stored_crc, bytes.data() + body, 4);
  if (const uint32_t crc = crc32c(0, bytes.data(), body); crc != stored_crc)
    r.fail(body, fmt::format("checksum mismatch (stored {:08x}, computed {:08x}): the file is "
                             "corrupt",
                             stored_crc, crc));
  if (bytes[body + 4] | bytes[body + 5] | bytes[body + 6] | bytes[body + 7])
    r.fail(body + 4, "non-zero trailer padding");

  const ModelHparams& hp = model->hparams();
  const auto model_id = r.get<uint64_t>("model id");
  if (model_id != model_id_hash(model->gguf()))
    r.fail(24, fmt::format("saved with another model (model id {:016x}, this model is {:016x})",
                           model_id, model_id_hash(model->gguf())));
  RingConfig g;
  g.n_slots = r.get<uint32_t>("n_slots");
  g.n_recall = r.get<uint32_t>("n_recall");
  g.probe_reserve = r.get<uint32_t>("probe_reserve");
  g.cut_chunk = r.get<uint32_t>("cut_chunk");
  const RingConfig& want = config.ring;
  if (g.n_slots != want.n_slots || g.n_recall != want.n_recall ||
      g.probe_reserve != want.probe_reserve || g.cut_chunk != want.cut_chunk)
    r.fail(32, fmt::format("saved with another geometry: {} slots, {} recall, probe reserve {}, "
                           "cut chunk {}; this session has {}, {}, {}, {}",
                           g.n_slots, g.n_recall, g.probe_reserve, g.cut_chunk, want.n_slots,
                           want.n_recall, want.probe_reserve, want.cut_chunk));
  const uint32_t dims[4] = {r.get<uint32_t>("n_layer"), r.get<uint32_t>("n_head_kv"),
                            r.get<uint32_t>("head_dim"), r.get<uint32_t>("n_vocab")};
  const int want_dims[4] = {hp.n_layer, hp.n_head_kv, hp.head_dim, hp.n_vocab};
  for (int i = 0; i < 4; ++i)
    if (dims[i] != static_cast<uint32_t>(want_dims[i]))
      r.fail(48 + 4 * i, "model shape does not match the model id");

  // Sections, in order. Each is parsed whole before anything is built from it.
  ByteReader body_reader{bytes.subspan(0, body), r.prefix, kHeaderBytes};
  ByteReader ring_r = body_reader.section(kTagRing, "RING");
  const auto ring_bytes = ring_r.take(ring_r.in.size() - ring_r.at, "ring state");
  SlotRing ring = load_ring_state(ring_bytes,
                                  fmt::format("{}: session file (ring state at offset {})", what,
                                              ring_r.at - ring_bytes.size()),
                                  &config.ring);

  const size_t sampler_at = body_reader.at;
  ByteReader sr = body_reader.section(kTagSampler, "SMPL");
  SamplerConfig sc;
  sc.temperature = sr.get<float>("temperature");
  sc.top_k = sr.get<int32_t>("top_k");
  sc.top_p = sr.get<float>("top_p");
  sc.min_p = sr.get<float>("min_p");
  sc.repeat_penalty = sr.get<float>("repeat_penalty");
  sc.repeat_last_n = sr.get<int32_t>("repeat_last_n");
  sc.seed = sr.get<uint64_t>("seed");
  std::array<uint64_t, 4> rng;
  for (auto& word : rng) word = sr.get<uint64_t>("rng state");
  if (sc.repeat_last_n > kMaxRepeatLastN)
    sr.fail(sr.at - 40,
            fmt::format("repeat_last_n {} is above {}", sc.repeat_last_n, kMaxRepeatLastN));
  const size_t recent_at = sr.at;
  const auto n_recent = sr.get<uint32_t>("recent token count");
  if (sc.repeat_last_n < 0 || n_recent > static_cast<uint32_t>(sc.repeat_last_n))
    sr.fail(recent_at,
            fmt::format("{} recent tokens for repeat_last_n {}", n_recent, sc.repeat_last_n));
  std::vector<int32_t> recent(n_recent);
  for (auto& t : recent) {
    t = sr.get<int32_t>("recent token");
    if (t < 0 || t >= hp.n_vocab)
      sr.fail(sr.at - 4, fmt::format("recent token {} is outside the vocabulary", t));
  }
  sr.expect_end("SMPL");

  ByteReader tr = body_reader.section(kTagStream, "STRM");
  StreamSpanState spans;
  const auto open = tr.get<int8_t>("open span type");
  if (open < -1 || open >= kSpanTypeCount)
    tr.fail(tr.at - 1, fmt::format("open span type {} out of range", open));
  if (open >= 0) spans.open = static_cast<SpanType>(open);
  const auto fresh = tr.get<uint8_t>("splitter fresh");
  if (fresh > 1) tr.fail(tr.at - 1, "bad splitter flag");
  spans.splitter.fresh = fresh;
  const auto tail_len = tr.get<uint16_t>("splitter tail length");
  if (tail_len > SentenceSplitter::kTailBytes)
    tr.fail(tr.at - 2, fmt::format("splitter tail of {} bytes", tail_len));
  const auto tail = tr.take(tail_len, "splitter tail");
  spans.splitter.tail.assign(tail.begin(), tail.end());
  tr.expect_end("STRM");

  ByteReader lr = body_reader.section(kTagLogits, "LOGT");
  if (lr.in.size() - lr.at != size_t(hp.n_vocab) * sizeof(float))
    lr.fail(lr.at, fmt::format("logits section is not {} floats", hp.n_vocab));
  std::vector<float> logits(hp.n_vocab);
  std::memcpy(logits.data(), lr.take(logits.size() * sizeof(float), "logits").data(),
              logits.size() * sizeof(float));

  ByteReader kr = body_reader.section(kTagKv, "KVAR");
  if (body_reader.at != body)
    body_reader.fail(body_reader.at,
                     fmt::format("{} bytes after the last section", body - body_reader.at));

  try {
    validate(sc);
    Sampler(sc).restore(rng, recent);
  } catch (const Error& e) {
    sr.fail(sampler_at, e.what());
  }
  auto session = std::make_unique<StreamSession>(model, config, sc);
  session->sampler().restore(rng, recent);
  session->restore_span_state(spans);
  RingSessionFile::read(session->ring_session(), std::move(ring), logits, kr);
  return session;
}

void save_session_file(const std::string& path, const StreamSession& session) {
  atomic_write(path, session_to_bytes(session));
}

std::unique_ptr<StreamSession> load_session_file(const std::string& path,
                                                 std::shared_ptr<const Model> model,
                                                 const RingSessionConfig& config) {
  const std::vector<uint8_t> bytes = read_file(path);
  return session_from_bytes(bytes, path, std::move(model), config);
}

}  // namespace channel
