// SessionBase: the one session interface (the shape of llama.cpp's llama_memory_i). Every
// session, the contiguous context (runtime/session.h: a geometry that never evicts, slot =
// position) and the KV slot ring (runtime/ring_session.h), offers the generation loop,
// speculative decoding and the frontends the same calls: decode, decode_all, truncate_last,
// logits, and owns its thread pool. The token checks live here, once; a session adds only what
// its geometry refuses (check_room).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "model/model.h"
#include "model/token_check.h"

namespace channel {

// n_threads as configured: 0 means one per hardware thread; negative is an error.
int resolve_threads(int n_threads);

class SessionBase {
 public:
  virtual ~SessionBase();
  SessionBase(const SessionBase&) = delete;
  SessionBase& operator=(const SessionBase&) = delete;

  // Appends tokens and returns the last one's logits [n_vocab], valid until the next call.
  // Throws channel::Error, with the state unchanged, for tokens check_tokens refuses.
  std::span<const float> decode(std::span<const int32_t> tokens);
  // The same, returning every token's logits: [n_tokens][n_vocab], valid until the next call.
  // A call of at most verify_capacity() tokens can be cut back by truncate_last.
  std::span<const float> decode_all(std::span<const int32_t> tokens);
  // Forgets the last k tokens (a rejected speculative draft); what each session can forget
  // is in its header. Throws channel::Error, state unchanged, when it cannot.
  void truncate_last(int k) { truncate(k); }
  // The logits of the last token decoded ([n_vocab]; zeros before the first).
  std::span<const float> logits() const { return logits_; }

  // Throws (see decode) unless `tokens` can be decoded now: the one token check.
  void check_tokens(std::span<const int32_t> tokens) const;
  // How many more tokens the session takes now (a ring: as many as its clock allows).
  virtual int64_t room() const = 0;
  // The most tokens one decode_all may hold so that truncate_last can drop all but one of
  // them (a speculative verify: the current token and its drafts), and which setting bounds
  // it, for messages.
  virtual int verify_capacity() const = 0;
  virtual const char* verify_capacity_hint() const = 0;
  // Forgets every token: a contiguous context starts empty again (a draft model's session
  // starting over). The slot ring cannot (its anchors and spans outlive it): channel::Error.
  virtual void reset();
  // Appends `tokens` as decode does, without the LM head, and writes each one's final-norm
  // hidden state (what the LM head reads) to rows: [n][n_embd] (text embeddings). The logits
  // are left as they were. Contiguous contexts compute them; others throw channel::Error.
  virtual void hidden_states(std::span<const int32_t> tokens, std::vector<float>& rows);

  const Model& model() const { return *model_; }
  int32_t n_vocab() const { return static_cast<int32_t>(logits_.size()); }
  ThreadPool& threads() { return pool_; }
  int n_threads() const { return pool_.size(); }  // compute threads, the caller included

 protected:
  // model may be null for a stand-in session in tests (n_vocab then sizes the logits).
  SessionBase(std::shared_ptr<const Model> model, int32_t n_vocab, int n_threads);

  // What the geometry refuses for n more tokens (a full context, anchors too long).
  virtual void check_room(size_t n) const = 0;
  // Runs checked tokens: all == nullptr puts the last token's logits into logits_, otherwise
  // every token's go to all [n][n_vocab] (tentative: truncate_last may follow).
  virtual void run(std::span<const int32_t> tokens, float* all) = 0;
  virtual void truncate(int k) = 0;
  // Called before the checks of every decode (a ring settles its tentative decode_all).
  virtual void before_decode() {}

  // Makes `row` (n_vocab floats, kept for as long as the session) the memory of logits_, its
  // values copied there: a device's page-locked row that its forward writes itself, so no
  // megabyte is copied a token.
  void use_logits_memory(float* row);

  std::shared_ptr<const Model> model_;
  ThreadPool pool_;

 private:
  std::vector<float> logits_own_;  // [n_vocab], unless a device lent its row

 protected:
  std::span<float> logits_;        // [n_vocab]: logits_own_ or the device's row
  std::vector<float> all_logits_;  // [n_tokens][n_vocab] of the last decode_all
};

}  // namespace channel
