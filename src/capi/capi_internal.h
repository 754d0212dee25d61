// Internal to the C API (channel_capi*.cpp): the handle types behind include/channel.h and the
// boundary helpers that turn every exception into a status code and a thread-local message.
#pragma once

#include <memory>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "capi/capi_error.h"
#include "channel.h"
#include "memory/auto_recall.h"
#include "memory/memory_attachment.h"
#include "memory/text_embedding.h"
#include "model/model.h"
#include "runtime/session_base.h"
#include "runtime/stream_session.h"
#include "util/error.h"

struct channel_model {
  std::shared_ptr<const channel::Model> model;
};

struct channel_embedder {
  std::shared_ptr<const channel::Model> model;
  std::unique_ptr<channel::SessionBase> context;  // reset before each call
  std::unique_ptr<channel::Embedder> embedder;
};

struct channel_session {
  std::shared_ptr<const channel::Model> model;
  std::unique_ptr<channel::StreamSession> stream;
  // channel_session_get_sampler's logit_bias points here.
  mutable std::vector<channel_logit_bias> logit_bias_view;
  // Destroyed first (reverse order): the attachment uses the session and the store.
  std::unique_ptr<channel::EpisodicStore> store;
  std::unique_ptr<channel::MemoryAttachment> memory;
  std::unique_ptr<channel::AutoRecall> auto_recall;  // destroyed before the attachment
};

namespace channel::capi {

// An error whose status the API chose (argument checks, I/O), not the call's default.
struct StatusError {
  channel_status status;
  std::string message;
};

template <typename... Args>
[[noreturn]] void fail(channel_status status, fmt::format_string<Args...> format, Args&&... args) {
  throw StatusError{status, fmt::format(format, std::forward<Args>(args)...)};
}

// Runs f; a channel::Error from the engine becomes `engine_status`.
template <typename F>
channel_status guarded(channel_status engine_status, F&& f) noexcept {
  try {
    f();
    set_last_error({});
    return CHANNEL_OK;
  } catch (const StatusError& e) {
    set_last_error(e.message);
    return e.status;
  } catch (const Error& e) {
    set_last_error(e.what());
    return engine_status;
  } catch (const std::bad_alloc&) {
    set_last_error("out of memory");
    return CHANNEL_ERR_NO_MEMORY;
  } catch (const std::exception& e) {
    set_last_error(e.what());
    return CHANNEL_ERR_INTERNAL;
  } catch (...) {
    set_last_error("unknown error");
    return CHANNEL_ERR_INTERNAL;
  }
}

template <typename T>
void require(const T* p, const char* name) {
  if (p == nullptr) fail(CHANNEL_ERR_ARGUMENT, "{} is NULL", name);
}

void require_session(const channel_session* s);
void require_readable(const char* path);
// The tokens [tokens, tokens + n) checked against the session's vocabulary.
std::span<const int32_t> token_span(const channel_session* s, const int32_t* tokens, size_t n);
SpanType span_type(channel_span_type t);

}  // namespace channel::capi
