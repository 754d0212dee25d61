// episodic_view.h: validation of `.episodic.mem` bytes (a mapped file or a buffer): the header,
// the index table, and each record's checksum. The store opens files through these checks, the
// fuzzer feeds them arbitrary bytes, and `channel mem verify` collects every problem they find.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "memory/episodic_format.h"

namespace channel {

// Copies out and validates the FileHeader of `data` (size bytes, named `name` in errors):
// magic, version, flags, sizes, zero padding, the header CRC, the file size the geometry
// implies, write_head < max_episodes. With `expect_model_hash`, a different model_id_hash is
// an error naming both hashes. Throws channel::Error.
FileHeader parse_header(const uint8_t* data, size_t size, const std::string& name,
                        std::optional<uint64_t> expect_model_hash, StoreLayout* layout);

// What an index slot holds.
enum class SlotState : uint8_t {
  empty,    // token_count == 0
  live,     // published: token_count > 0 and episode_id < total_episodes
  pending,  // an unpublished append at write_head (episode_id == total_episodes); invisible
};

EpisodeHeader read_episode_header(const StoreLayout& L, const uint8_t* data, uint64_t slot);

// The structural problem of slot `slot`'s entry, or nullopt: a live or pending entry must have
// token_count <= max_tokens, summary_len <= 256, known flags, a finite salience >= 0, and a
// parent id below its own; an unpublished id may only sit at write_head.
std::optional<std::string> entry_problem(const StoreLayout& L, const FileHeader& h,
                                         const uint8_t* data, uint64_t slot, SlotState* state);

// States of every slot; throws channel::Error on the first structural problem or a
// duplicated episode id.
std::vector<SlotState> parse_index(const StoreLayout& L, const FileHeader& h, const uint8_t* data,
                                   const std::string& name);

// The problem with live slot `slot`'s record (block magic, the id/count echo in the block
// header, zero bytes, the checksum), or nullopt when it verifies. kv_crc: crc32c(0, K/V bytes)
// already computed by the caller (who read them), else they are read here.
std::optional<std::string> record_problem(const StoreLayout& L, const uint8_t* data, uint64_t slot,
                                          const uint32_t* kv_crc = nullptr);
// Its parts, for a record read apart from the mapping: the block header's problem (magic, echo,
// zero bytes; `block` holds at least its first 64 bytes, `boff` is its file offset), and the
// message of a checksum mismatch.
std::optional<std::string> block_header_problem(const EpisodeHeader& e, uint64_t slot,
                                                const uint8_t* block, uint64_t boff);
std::string checksum_problem(const EpisodeHeader& e, uint64_t slot, uint64_t boff, uint32_t stored,
                             uint32_t computed);

// The problem with live slot `slot`'s retrieval entry (version 2: id and token count echo, zero
// bytes, its checksum), or nullopt (also for a version 1 file).
std::optional<std::string> retrieval_entry_problem(const StoreLayout& L, const uint8_t* data,
                                                   uint64_t slot);

// The problem with live slot `slot`'s lexical entry (version 3: id echo, a count in
// 1..token_count, its checksum, ascending distinct ids), or nullopt (also without a lexical
// section). `e` is the slot's index header, `entry` the entry's L.lex_entry_bytes bytes.
std::optional<std::string> lexical_entry_problem(const StoreLayout& L, const EpisodeHeader& e,
                                                uint64_t slot, const uint8_t* entry);

struct VerifyReport {
  std::vector<std::string> problems;  // each an inconsistency; empty when the file verifies
  std::vector<std::string> notes;     // harmless findings (a pending unpublished append)
  std::vector<uint64_t> damaged_episodes;  // ids of live episodes whose record fails its check
  std::vector<uint64_t> damaged_slots;     // index slots whose entry is damaged (id unknown)
  uint64_t live = 0;
  uint64_t records_checked = 0;
  bool ok() const { return problems.empty(); }
};

// Checks everything and reports every problem instead of stopping at the first; never throws
// for bad content.
VerifyReport verify_store(const uint8_t* data, size_t size, const std::string& name);

}  // namespace channel
