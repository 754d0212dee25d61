// Session files: a whole StreamSession on disk (model identity, geometry, ring state, the
// live K/V, the last logits, sampler and span state), checksummed and written atomically,
// so that a restarted process resumes with bit-identical next logits. Byte layout:
// docs/formats.md, "Session files".
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/stream_session.h"

namespace channel {

// The file's bytes. Throws channel::Error during a probe, or while a tentative
// RingSession::decode_all (speculation) is not yet settled by truncate_last.
std::vector<uint8_t> session_to_bytes(const StreamSession& session);

// Rebuilds a session from `bytes` (`what` names them in errors). `config` gives the threads
// and batch size; its geometry must equal the file's. A file that is truncated, corrupt
// (checksum), of another model or geometry, or inconsistent in any field is a one-line
// channel::Error naming the field and byte offset.
std::unique_ptr<StreamSession> session_from_bytes(std::span<const uint8_t> bytes,
                                                  std::string_view what,
                                                  std::shared_ptr<const Model> model,
                                                  const RingSessionConfig& config);

// Writes PATH.tmp, fsyncs it, renames it over PATH and fsyncs the directory: PATH holds
// either the previous file or the new one, whole, even after a crash. On error the
// temporary file is removed and PATH is untouched.
void save_session_file(const std::string& path, const StreamSession& session);

// Reads and checks the whole file before building anything; never modifies it.
std::unique_ptr<StreamSession> load_session_file(const std::string& path,
                                                 std::shared_ptr<const Model> model,
                                                 const RingSessionConfig& config);

}  // namespace channel
