// episodic_format.h: the byte layout of a `.episodic.mem` file (docs/memory-format.md, section
// ".episodic.mem"): the 64-byte FileHeader, the index table of EpisodeHeader + FP16 centroid
// entries, and the fixed-stride slab blocks; the geometry computed from the header, and the
// record checksum. Little-endian; every struct here is the exact on-disk image.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace channel {

static_assert(std::endian::native == std::endian::little, "the store is little-endian");

inline constexpr char kEmemMagic[4] = {'E', 'M', 'E', 'M'};
inline constexpr uint32_t kEmemVersion = 1;     // no retrieval section
inline constexpr uint32_t kEmemVersionExt = 2;  // a retrieval section follows the slab section
inline constexpr uint32_t kEmemVersionLex = 3;  // and a lexical section follows that
inline constexpr uint32_t kRetrievalMagic = 0x58524D45;  // "EMRX" as bytes
inline constexpr uint32_t kLexicalMagic = 0x584C4D45;    // "EMLX" as bytes
inline constexpr uint32_t kSlabBlockMagic = 0x42535045;   // "EPSB" as bytes
inline constexpr size_t kSummaryMax = 256;                // bytes of UTF-8 summary
inline constexpr uint32_t kNoContinuation = 0xFFFFFFFFu;  // continuation_token unknown
inline constexpr uint64_t kNoEpisode = ~uint64_t{0};      // parent_episode_id: none

// FileHeader.file_flags
inline constexpr uint32_t kFileFp16 = 1u << 0;
inline constexpr uint32_t kFileQ8_0 = 1u << 1;
inline constexpr uint32_t kFileCompressed = 1u << 2;  // defined by the spec, refused here

// EpisodeHeader.flags
inline constexpr uint16_t kEpisodeInterrupted = 1u << 0;
inline constexpr uint16_t kEpisodeHasTool = 1u << 1;
inline constexpr uint16_t kEpisodePinned = 1u << 2;
inline constexpr uint16_t kEpisodeKnownFlags = 0x7;

// Offsets are fixed (files written by any build must stay readable); the 8 reserved bytes
// at 56 are used as documented in docs/memory-format.md: max_tokens_per_episode and a CRC-32C of
// the immutable header bytes [0, 32) ++ [48, 60).
struct FileHeader {
  char magic[4];
  uint32_t version;
  uint32_t file_flags;
  uint32_t num_layers;
  uint32_t hidden_size;
  uint32_t kv_dim;  // K (or V) elements per token per layer
  uint32_t max_episodes;
  uint32_t padding;                 // zero
  uint64_t total_episodes;          // episodes ever published; the next episode_id
  uint64_t write_head;              // slot where the next append starts looking
  uint64_t model_id_hash;           // FNV-1a 64 of the model signature
  uint32_t max_tokens_per_episode;  // reserved[0..4)
  uint32_t header_crc;              // reserved[4..8)
};
static_assert(sizeof(FileHeader) == 64);
static_assert(offsetof(FileHeader, total_episodes) == 32);
static_assert(offsetof(FileHeader, write_head) == 40);
static_assert(offsetof(FileHeader, model_id_hash) == 48);
static_assert(offsetof(FileHeader, max_tokens_per_episode) == 56);

// An index slot is live when token_count > 0 and episode_id < total_episodes, so a writer
// publishes a slot with one store and a torn append leaves it dead.
struct EpisodeHeader {
  uint64_t episode_id;
  uint64_t parent_episode_id;  // kNoEpisode when the episode starts a stream
  uint64_t created_timestamp;  // ms since the Unix epoch
  uint64_t last_accessed;      // ms since the Unix epoch of the last recall, 0 = never
  uint64_t start_clock;        // token clock of the first token; token i is at start_clock + i
  uint32_t token_count;
  uint32_t access_count;
  uint32_t child_count;
  float salience_norm;          // ||Δx||
  uint32_t continuation_token;  // token that followed the episode, kNoContinuation if unknown
  uint16_t flags;
  uint16_t summary_len;
};
static_assert(sizeof(EpisodeHeader) == 64);
static_assert(offsetof(EpisodeHeader, token_count) == 40);
static_assert(offsetof(EpisodeHeader, salience_norm) == 52);
static_assert(offsetof(EpisodeHeader, flags) == 60);
static_assert(offsetof(EpisodeHeader, summary_len) == 62);

// First 64 bytes of every slab block.
struct SlabBlockHeader {
  uint32_t magic;  // kSlabBlockMagic
  uint32_t crc;    // record checksum, see record_checksum()
  uint64_t episode_id;
  uint32_t token_count;
  uint16_t summary_len;
  uint16_t zero0;
  uint8_t zero[40];
};
static_assert(sizeof(SlabBlockHeader) == 64);

// The retrieval section of a version 2 file (docs/memory-format.md, "Retrieval section"): a 64-byte
// section header at StoreLayout::ext_offset, then one entry per slot.
inline constexpr uint32_t kRetrievalKeys = 1u << 0;  // representative keys per KV head
inline constexpr uint32_t kRetrievalProj = 1u << 1;  // projected vector per token
inline constexpr uint32_t kRetrievalKnown = 0x3;
inline constexpr uint32_t kMaxKeysPerHead = 256;
inline constexpr uint32_t kMaxProjDim = 4096;

struct RetrievalSectionHeader {
  uint32_t magic;          // kRetrievalMagic
  uint32_t kinds;          // kRetrievalKeys | kRetrievalProj, at least one
  uint32_t key_layers;     // = num_layers
  uint32_t key_heads;      // KV heads; key_heads * head_dim = kv_dim
  uint32_t head_dim;
  uint32_t keys_per_head;  // R (0 without keys)
  uint32_t proj_dim;       // d_r (0 without proj)
  uint32_t proj_tokens;    // = max_tokens_per_episode (0 without proj)
  uint64_t entry_bytes;    // per slot, a multiple of 64
  uint32_t keys_offset;    // inside an entry (64)
  uint32_t proj_offset;    // inside an entry
  uint8_t zero[12];
  uint32_t crc;  // CRC-32C of bytes [0, 60)
};
static_assert(sizeof(RetrievalSectionHeader) == 64);

// First 64 bytes of every retrieval entry.
struct RetrievalEntryHeader {
  uint64_t episode_id;   // must equal the index entry's
  uint32_t token_count;  // must equal the index entry's
  uint32_t crc;          // CRC-32C of entry bytes [0, 12) ++ [16, entry_bytes)
  uint8_t zero[48];
};
static_assert(sizeof(RetrievalEntryHeader) == 64);

// The lexical section of a version 3 file (docs/memory-format.md, "Lexical section"): a 64-byte
// section header after the retrieval section, then one entry per slot holding the distinct
// token ids of its episode, so that a fresh process builds the lexical index of recall from
// one contiguous read instead of one read per episode.
struct LexicalSectionHeader {
  uint32_t magic;        // kLexicalMagic
  uint32_t max_tokens;   // = max_tokens_per_episode
  uint64_t entry_bytes;  // per slot: round_up(16 + 4 * max_tokens, 64)
  uint8_t zero[44];
  uint32_t crc;  // CRC-32C of bytes [0, 60)
};
static_assert(sizeof(LexicalSectionHeader) == 64);

// First 16 bytes of every lexical entry; count token ids (i32, ascending, distinct) follow.
struct LexicalEntryHeader {
  uint64_t episode_id;  // must equal the index entry's
  uint32_t count;       // distinct tokens, 1..the index entry's token_count
  uint32_t crc;         // CRC-32C of entry bytes [0, 12) ++ [16, 16 + 4 * count)
};
static_assert(sizeof(LexicalEntryHeader) == 16);

enum class SlabType : uint8_t { f16, q8_0 };
const char* slab_type_name(SlabType t);

// Everything the header fixes. Computed by make_layout(), which checks every product.
struct StoreLayout {
  SlabType slab_type = SlabType::f16;
  uint32_t num_layers = 0;
  uint32_t hidden_size = 0;
  uint32_t kv_dim = 0;
  uint32_t max_episodes = 0;
  uint32_t max_tokens = 0;
  uint64_t row_bytes = 0;    // one token's K (or V) of one layer
  uint64_t entry_bytes = 0;  // index entry: 64 + 2 * hidden_size, rounded up to 64
  uint64_t index_offset = 64;
  uint64_t slab_offset = 0;     // first 64-byte boundary after the index table
  uint64_t block_summary = 64;  // offsets inside a slab block
  uint64_t block_tokens = 64 + kSummaryMax;
  uint64_t block_kv = 0;      // round_up(320 + 4 * max_tokens, 64)
  uint64_t block_stride = 0;  // round_up(block_kv + 2 * num_layers * max_tokens * row_bytes, 64)
  uint64_t file_size = 0;
  // Version 2: the retrieval section (ext_kinds == 0: version 1, none).
  uint32_t version = kEmemVersion;
  uint32_t ext_kinds = 0;
  uint32_t key_heads = 0, head_dim = 0, keys_per_head = 0, proj_dim = 0;
  uint64_t ext_offset = 0;       // section header; entries follow at ext_offset + 64
  uint64_t ext_entry_bytes = 0;  // per slot
  uint64_t ext_keys = 64;        // offsets inside an entry
  uint64_t ext_proj = 0;
  // Version 3: the lexical section (lex_entry_bytes == 0: none).
  uint64_t lex_offset = 0;       // section header; entries follow at lex_offset + 64
  uint64_t lex_entry_bytes = 0;  // per slot

  bool has_keys() const { return (ext_kinds & kRetrievalKeys) != 0; }
  bool has_proj() const { return (ext_kinds & kRetrievalProj) != 0; }
  bool has_lexical() const { return lex_entry_bytes != 0; }
  uint64_t lex_entry_offset(uint64_t slot) const { return lex_offset + 64 + slot * lex_entry_bytes; }
  // f16 values of an entry's keys: [num_layers][key_heads][keys_per_head][head_dim].
  uint64_t keys_values() const {
    return uint64_t{num_layers} * key_heads * keys_per_head * head_dim;
  }
  uint64_t ext_entry_offset(uint64_t slot) const { return ext_offset + 64 + slot * ext_entry_bytes; }
  uint64_t entry_offset(uint64_t slot) const { return index_offset + slot * entry_bytes; }
  uint64_t block_offset(uint64_t slot) const { return slab_offset + slot * block_stride; }
  // Bytes of K/V an episode of n tokens uses: [num_layers][2][n][row_bytes].
  uint64_t kv_bytes(uint64_t n) const { return 2ull * num_layers * n * row_bytes; }
  // Offset, inside the block, of layer l's K (kv = 0) or V (kv = 1) rows of an n-token episode.
  uint64_t kv_plane(uint64_t n, uint32_t layer, int kv) const {
    return block_kv + (2ull * layer + static_cast<uint64_t>(kv)) * n * row_bytes;
  }
};

// Creation parameters (also what a header must describe).
struct StoreGeometry {
  uint32_t num_layers = 0;
  uint32_t hidden_size = 0;
  uint32_t kv_dim = 0;
  uint32_t max_episodes = 0;
  uint32_t max_tokens = 64;
  SlabType slab_type = SlabType::f16;
  // Retrieval section (version 2) when ext_kinds != 0. head_dim must divide kv_dim.
  uint32_t ext_kinds = 0;
  uint32_t head_dim = 0;       // with kRetrievalKeys
  uint32_t keys_per_head = 8;  // R, with kRetrievalKeys
  uint32_t proj_dim = 0;       // d_r, with kRetrievalProj
  // Version 3: a lexical section after the retrieval section (needs ext_kinds).
  bool lexical = false;
};

// Checks the geometry (non-zero sizes, Q8_0 needs kv_dim % 32 == 0, file size < 2^62) and
// computes the layout. Throws channel::Error starting with `what`.
StoreLayout make_layout(const StoreGeometry& g, const std::string& what);

// The section header that describes L's retrieval section (L.ext_kinds != 0), crc set.
RetrievalSectionHeader retrieval_section_header(const StoreLayout& L);
// CRC-32C of a retrieval entry (`entry` holds L.ext_entry_bytes bytes): [0, 12) ++ [16, end).
uint32_t retrieval_entry_crc(const StoreLayout& L, const uint8_t* entry);

// The section header that describes L's lexical section (L.has_lexical()), crc set.
LexicalSectionHeader lexical_section_header(const StoreLayout& L);
// The entry image of an episode of `tokens` (any order, repeats allowed): [L.lex_entry_bytes].
std::vector<uint8_t> lexical_entry(const StoreLayout& L, uint64_t episode_id,
                                   std::span<const int32_t> tokens);
// CRC-32C of a lexical entry whose header says `count` tokens: [0, 12) ++ [16, 16 + 4 count).
uint32_t lexical_entry_crc(const uint8_t* entry, uint32_t count);

// CRC-32C of the header bytes that never change after creation: [0, 32) and [48, 60).
uint32_t header_crc(const FileHeader& h);

// The record checksum stored in SlabBlockHeader::crc: CRC-32C, chained over
//   1. the EpisodeHeader with its mutable fields zeroed (last_accessed, access_count,
//      child_count, the pinned flag),
//   2. the centroid, 2 * hidden_size bytes,
//   3. the slab block bytes [8, block_tokens + 4 * token_count): id, counts, summary area,
//      token ids,
//   4. the K/V bytes [block_kv, block_kv + kv_bytes(token_count)).
// `entry` points at the index entry (header + centroid) and `block` at the slab block.
uint32_t record_checksum(const StoreLayout& L, const uint8_t* entry, const uint8_t* block);
// Parts 1-3 of it: chain crc32c over the K/V bytes, in file order, to finish it. `block` may
// be a copy of just the block's first block_kv bytes.
uint32_t record_checksum_head(const StoreLayout& L, const uint8_t* entry, const uint8_t* block);

inline uint64_t round_up64(uint64_t x) {
  return (x + 63) & ~uint64_t{63};
}

}  // namespace channel
