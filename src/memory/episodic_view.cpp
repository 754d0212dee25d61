// Validation of .episodic.mem bytes: header, index structure, record checksums, verify.
#include "memory/episodic_view.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include "util/hash.h"
#include "util/error.h"

namespace channel {

namespace {

std::string hex64(uint64_t v) {
  return fmt::format("{:#018x}", v);
}

// The section header H at `off` (the retrieval or the lexical section), its magic checked;
// `tag` is the magic's four letters.
template <typename H>
H read_section_header(const uint8_t* data, size_t size, uint64_t off, uint32_t magic,
                      const char* tag, const std::string& swhat) {
  if (size < off + sizeof(H)) {
    throw_error("{}: the file has {} bytes, the section header needs {} (truncated)", swhat, size,
                off + sizeof(H));
  }
  H h;
  std::memcpy(&h, data + off, sizeof h);
  if (h.magic != magic)
    throw_error("{}: bad magic {:#010x}, expected '{}' (at offset {})", swhat, h.magic, tag, off);
  return h;
}

}  // namespace

FileHeader parse_header(const uint8_t* data, size_t size, const std::string& name,
                        std::optional<uint64_t> expect_model_hash, StoreLayout* layout) {
  const std::string what = fmt::format("episodic: {}: header", name);
  if (size < sizeof(FileHeader)) {
    throw_error("{}: truncated: the file has {} bytes, the header needs 64 (at offset 0)", what,
                size);
  }
  FileHeader h;
  std::memcpy(&h, data, sizeof h);
  if (std::memcmp(h.magic, kEmemMagic, 4) != 0) {
    throw_error("{}: bad magic {:02x} {:02x} {:02x} {:02x}, expected 'EMEM' (at offset 0)", what,
                static_cast<uint8_t>(h.magic[0]), static_cast<uint8_t>(h.magic[1]),
                static_cast<uint8_t>(h.magic[2]), static_cast<uint8_t>(h.magic[3]));
  }
  if (h.version != kEmemVersion && h.version != kEmemVersionExt && h.version != kEmemVersionLex) {
    throw_error("{}: unsupported version {} (this build reads versions 1, 2 and 3) (at offset 4)",
                what, h.version);
  }
  if (h.file_flags & kFileCompressed) {
    throw_error("{}: compressed slabs (file_flags bit 2) are not supported (at offset 8)", what);
  }
  if (h.file_flags & ~(kFileFp16 | kFileQ8_0 | kFileCompressed)) {
    throw_error("{}: unknown file_flags bits {:#x} (at offset 8)", what, h.file_flags);
  }
  if ((h.file_flags & (kFileFp16 | kFileQ8_0)) == 0 ||
      (h.file_flags & (kFileFp16 | kFileQ8_0)) == (kFileFp16 | kFileQ8_0)) {
    throw_error(
        "{}: file_flags {:#x} must set exactly one of FP16 (bit 0) and Q8_0 (bit 1) "
        "(at offset 8)",
        what, h.file_flags);
  }
  if (h.padding != 0) throw_error("{}: padding is {}, not 0 (at offset 28)", what, h.padding);
  if (h.header_crc != header_crc(h)) {
    throw_error(
        "{}: header checksum {:#010x} does not match the header bytes ({:#010x}): "
        "the header is damaged (at offset 60)",
        what, h.header_crc, header_crc(h));
  }
  StoreGeometry g;
  g.num_layers = h.num_layers;
  g.hidden_size = h.hidden_size;
  g.kv_dim = h.kv_dim;
  g.max_episodes = h.max_episodes;
  g.max_tokens = h.max_tokens_per_episode;
  g.slab_type = (h.file_flags & kFileQ8_0) ? SlabType::q8_0 : SlabType::f16;
  StoreLayout L = make_layout(g, what);
  if (h.version >= kEmemVersionExt) {
    // The retrieval section's header sits where a version 1 file would end.
    const uint64_t off = L.file_size;
    const std::string swhat = fmt::format("episodic: {}: retrieval section", name);
    const auto r = read_section_header<RetrievalSectionHeader>(data, size, off, kRetrievalMagic,
                                                               "EMRX", swhat);
    if (r.crc != crc32c(0, &r, 60)) {
      throw_error("{}: checksum {:#010x} does not match the section header ({:#010x}) (at offset {})",
                  swhat, r.crc, crc32c(0, &r, 60), off + 60);
    }
    if (r.kinds == 0 || (r.kinds & ~kRetrievalKnown))
      throw_error("{}: kinds {:#x} is not a non-empty set of known kinds (at offset {})", swhat,
                  r.kinds, off + 4);
    g.ext_kinds = r.kinds;
    g.head_dim = r.head_dim;
    g.keys_per_head = r.keys_per_head;
    g.proj_dim = r.proj_dim;
    g.lexical = h.version == kEmemVersionLex;
    L = make_layout(g, swhat);
    // Every other field must be the one the geometry implies: nothing is left to interpret.
    const RetrievalSectionHeader want = retrieval_section_header(L);
    if (std::memcmp(&want, &r, sizeof r) != 0) {
      throw_error(
          "{}: fields do not match the geometry (layers {} heads {} head_dim {} R {} d_r {} "
          "tokens {} entry {} bytes; expected layers {} heads {} R {} tokens {} entry {}) (at "
          "offset {})",
          swhat, r.key_layers, r.key_heads, r.head_dim, r.keys_per_head, r.proj_dim,
          r.proj_tokens, r.entry_bytes, want.key_layers, want.key_heads, want.keys_per_head,
          want.proj_tokens, want.entry_bytes, off + 8);
    }
  }
  if (h.version == kEmemVersionLex) {
    // The lexical section's header sits where a version 2 file would end.
    const uint64_t off = L.lex_offset;
    const std::string swhat = fmt::format("episodic: {}: lexical section", name);
    const auto x =
        read_section_header<LexicalSectionHeader>(data, size, off, kLexicalMagic, "EMLX", swhat);
    const LexicalSectionHeader want = lexical_section_header(L);
    if (std::memcmp(&want, &x, sizeof x) != 0) {
      throw_error(
          "{}: fields do not match the geometry (tokens {} entry {} bytes crc {:#010x}; expected "
          "tokens {} entry {} crc {:#010x}) (at offset {})",
          swhat, x.max_tokens, x.entry_bytes, x.crc, want.max_tokens, want.entry_bytes, want.crc,
          off + 4);
    }
  }
  if (size != L.file_size) {
    throw_error("{}: the file has {} bytes but its geometry needs exactly {}{}", what, size,
                L.file_size, size < L.file_size ? " (truncated)" : "");
  }
  if (h.write_head >= h.max_episodes) {
    throw_error("{}: write_head {} is not below max_episodes {} (at offset 40)", what, h.write_head,
                h.max_episodes);
  }
  if (expect_model_hash && *expect_model_hash != h.model_id_hash) {
    throw_error(
        "{}: written for another model (model_id_hash {}, this model is {}) "
        "(at offset 48)",
        what, hex64(h.model_id_hash), hex64(*expect_model_hash));
  }
  if (layout) *layout = L;
  return h;
}

EpisodeHeader read_episode_header(const StoreLayout& L, const uint8_t* data, uint64_t slot) {
  EpisodeHeader e;
  std::memcpy(&e, data + L.entry_offset(slot), sizeof e);
  return e;
}

std::optional<std::string> entry_problem(const StoreLayout& L, const FileHeader& h,
                                         const uint8_t* data, uint64_t slot, SlotState* state) {
  const EpisodeHeader e = read_episode_header(L, data, slot);
  const uint64_t off = L.entry_offset(slot);
  *state = SlotState::empty;
  if (e.token_count == 0) return std::nullopt;
  auto problem = [&](uint64_t field_off, std::string msg) {
    return fmt::format("index slot {} (episode {}): {} (at offset {})", slot, e.episode_id, msg,
                       off + field_off);
  };
  if (e.episode_id >= h.total_episodes) {
    if (slot != h.write_head || e.episode_id != h.total_episodes) {
      return problem(0, fmt::format("episode id is not below total_episodes {} and the slot is "
                                    "not the pending append at write_head {}",
                                    h.total_episodes, h.write_head));
    }
    *state = SlotState::pending;
    return std::nullopt;  // unpublished: its content is not trusted, and never read
  }
  *state = SlotState::live;
  if (e.token_count > L.max_tokens) {
    return problem(40, fmt::format("token_count {} exceeds max_tokens_per_episode {}",
                                   e.token_count, L.max_tokens));
  }
  if (e.summary_len > kSummaryMax) {
    return problem(62, fmt::format("summary_len {} exceeds {}", e.summary_len, kSummaryMax));
  }
  if (e.flags & ~kEpisodeKnownFlags) {
    return problem(60, fmt::format("unknown flags {:#x}", e.flags));
  }
  if (!std::isfinite(e.salience_norm) || e.salience_norm < 0.0f) {
    return problem(52, fmt::format("salience_norm {} is not a finite value >= 0", e.salience_norm));
  }
  if (e.parent_episode_id != kNoEpisode && e.parent_episode_id >= e.episode_id) {
    return problem(
        8, fmt::format("parent_episode_id {} is not older than the episode", e.parent_episode_id));
  }
  return std::nullopt;
}

std::vector<SlotState> parse_index(const StoreLayout& L, const FileHeader& h, const uint8_t* data,
                                   const std::string& name) {
  std::vector<SlotState> states(L.max_episodes);  // [max_episodes]
  std::unordered_map<uint64_t, uint64_t> slot_of_id;
  for (uint64_t s = 0; s < L.max_episodes; ++s) {
    if (auto p = entry_problem(L, h, data, s, &states[s])) {
      throw_error("episodic: {}: {}", name, *p);
    }
    if (states[s] != SlotState::live) continue;
    const uint64_t id = read_episode_header(L, data, s).episode_id;
    auto [it, fresh] = slot_of_id.emplace(id, s);
    if (!fresh) {
      throw_error("episodic: {}: index slot {}: episode id {} is also in slot {} (at offset {})",
                  name, s, id, it->second, L.entry_offset(s));
    }
  }
  return states;
}

std::optional<std::string> block_header_problem(const EpisodeHeader& e, uint64_t slot,
                                                const uint8_t* block, uint64_t boff) {
  SlabBlockHeader b;
  std::memcpy(&b, block, sizeof b);
  auto problem = [&](uint64_t field_off, std::string msg) {
    return fmt::format("slab of episode {} (slot {}): {} (at offset {})", e.episode_id, slot, msg,
                       boff + field_off);
  };
  if (b.magic != kSlabBlockMagic)
    return problem(0, fmt::format("bad block magic {:#010x}", b.magic));
  if (b.episode_id != e.episode_id) {
    return problem(8, fmt::format("block belongs to episode {}", b.episode_id));
  }
  if (b.token_count != e.token_count || b.summary_len != e.summary_len) {
    return problem(16, fmt::format("block says {} tokens / summary {} bytes, index says {} / {}",
                                   b.token_count, b.summary_len, e.token_count, e.summary_len));
  }
  if (b.zero0 != 0 || std::any_of(b.zero, b.zero + sizeof b.zero, [](uint8_t z) { return z; })) {
    return problem(22, "reserved block header bytes are not zero");
  }
  return std::nullopt;
}

std::string checksum_problem(const EpisodeHeader& e, uint64_t slot, uint64_t boff, uint32_t stored,
                             uint32_t computed) {
  return fmt::format(
      "slab of episode {} (slot {}): checksum mismatch: stored {:#010x}, computed {:#010x} (at "
      "offset {})",
      e.episode_id, slot, stored, computed, boff + 4);
}

std::optional<std::string> record_problem(const StoreLayout& L, const uint8_t* data, uint64_t slot,
                                          const uint32_t* kv_crc) {
  const EpisodeHeader e = read_episode_header(L, data, slot);
  const uint64_t boff = L.block_offset(slot);
  const uint8_t* block = data + boff;
  if (auto p = block_header_problem(e, slot, block, boff)) return p;
  SlabBlockHeader b;
  std::memcpy(&b, block, sizeof b);
  const uint32_t crc =
      kv_crc ? crc32c_combine(record_checksum_head(L, data + L.entry_offset(slot), block), *kv_crc,
                              L.kv_bytes(e.token_count))
             : record_checksum(L, data + L.entry_offset(slot), block);
  if (crc != b.crc) return checksum_problem(e, slot, boff, b.crc, crc);
  return std::nullopt;
}

std::optional<std::string> retrieval_entry_problem(const StoreLayout& L, const uint8_t* data,
                                                   uint64_t slot) {
  if (L.ext_kinds == 0) return std::nullopt;
  const EpisodeHeader e = read_episode_header(L, data, slot);
  const uint64_t off = L.ext_entry_offset(slot);
  RetrievalEntryHeader r;
  std::memcpy(&r, data + off, sizeof r);
  auto problem = [&](uint64_t field_off, std::string msg) {
    return fmt::format("retrieval entry of episode {} (slot {}): {} (at offset {})", e.episode_id,
                       slot, msg, off + field_off);
  };
  if (r.episode_id != e.episode_id)
    return problem(0, fmt::format("entry belongs to episode {}", r.episode_id));
  if (r.token_count != e.token_count)
    return problem(8, fmt::format("entry says {} tokens, index says {}", r.token_count,
                                  e.token_count));
  if (std::any_of(r.zero, r.zero + sizeof r.zero, [](uint8_t z) { return z; }))
    return problem(16, "reserved entry bytes are not zero");
  const uint32_t crc = retrieval_entry_crc(L, data + off);
  if (crc != r.crc) {
    return problem(12, fmt::format("checksum mismatch: stored {:#010x}, computed {:#010x}", r.crc,
                                   crc));
  }
  return std::nullopt;
}

std::optional<std::string> lexical_entry_problem(const StoreLayout& L, const EpisodeHeader& e,
                                                uint64_t slot, const uint8_t* entry) {
  if (!L.has_lexical()) return std::nullopt;
  const uint64_t off = L.lex_entry_offset(slot);
  LexicalEntryHeader x;
  std::memcpy(&x, entry, sizeof x);
  auto problem = [&](uint64_t field_off, std::string msg) {
    return fmt::format("lexical entry of episode {} (slot {}): {} (at offset {})", e.episode_id,
                       slot, msg, off + field_off);
  };
  if (x.episode_id != e.episode_id)
    return problem(0, fmt::format("entry belongs to episode {}", x.episode_id));
  if (x.count == 0 || x.count > e.token_count || x.count > L.max_tokens)
    return problem(8, fmt::format("{} distinct tokens, outside 1..{}", x.count,
                                  std::min(e.token_count, L.max_tokens)));
  const uint32_t crc = lexical_entry_crc(entry, x.count);
  if (crc != x.crc)
    return problem(12, fmt::format("checksum mismatch: stored {:#010x}, computed {:#010x}", x.crc,
                                   crc));
  const uint8_t* t = entry + sizeof x;
  for (uint32_t i = 1; i < x.count; ++i) {
    int32_t a, b;
    std::memcpy(&a, t + 4 * (i - 1), 4);
    std::memcpy(&b, t + 4 * i, 4);
    if (!(a < b)) return problem(16 + 4 * i, "token ids are not ascending and distinct");
  }
  return std::nullopt;
}

VerifyReport verify_store(const uint8_t* data, size_t size, const std::string& name) {
  VerifyReport r;
  FileHeader h;
  StoreLayout L;
  try {
    h = parse_header(data, size, name, std::nullopt, &L);
  } catch (const Error& e) {
    r.problems.push_back(e.what());
    return r;
  }
  std::unordered_map<uint64_t, uint64_t> slot_of_id;
  for (uint64_t s = 0; s < L.max_episodes; ++s) {
    SlotState st;
    if (auto p = entry_problem(L, h, data, s, &st)) {
      r.problems.push_back(*p);
      r.damaged_slots.push_back(s);
      continue;
    }
    if (st == SlotState::pending) {
      r.notes.push_back(
          fmt::format("index slot {}: an unpublished append of episode {} was "
                      "interrupted; it is invisible and the next append reuses "
                      "the slot",
                      s, h.total_episodes));
    }
    if (st != SlotState::live) continue;
    ++r.live;
    const uint64_t id = read_episode_header(L, data, s).episode_id;
    auto [it, fresh] = slot_of_id.emplace(id, s);
    if (!fresh) {
      r.problems.push_back(
          fmt::format("index slot {}: episode id {} is also in slot {}", s, id, it->second));
    }
    ++r.records_checked;
    const std::optional<std::string> rec = record_problem(L, data, s);
    const std::optional<std::string> ret = retrieval_entry_problem(L, data, s);
    const std::optional<std::string> lex = lexical_entry_problem(
        L, read_episode_header(L, data, s), s, data + L.lex_entry_offset(s));
    if (rec) r.problems.push_back(*rec);
    if (ret) r.problems.push_back(*ret);
    if (lex) r.problems.push_back(*lex);
    if (rec || ret || lex) r.damaged_episodes.push_back(id);
  }
  return r;
}

}  // namespace channel
