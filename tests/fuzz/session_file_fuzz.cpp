// libFuzzer target for session files: any bytes go through session_from_bytes twice, as
// they are and with the header's length and the checksum trailer rewritten to fit (so the
// mutations reach the section parsers behind the checksum). A loaded session must then
// decode and save. Only channel::Error may escape; anything else is a bug.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "memory/memory_kernels.h"
#include "runtime/session_file.h"
#include "session_fuzz_model.h"
#include "util/error.h"
#include "util/hash.h"

namespace {

void load(const std::vector<uint8_t>& bytes) {
  try {
    auto s = channel::session_from_bytes(bytes, "fuzz.session", channel::fuzz::session_fuzz_model(),
                                         channel::fuzz::session_fuzz_config());
    if (s->clock() > 0 && s->ring_session().ring().sealed()) {
      const int32_t t = 7;
      s->feed(channel::SpanType::user, {&t, 1});
      s->next(channel::EogPolicy::turn_end);
    }
    (void)channel::session_to_bytes(*s);
  } catch (const channel::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  load(bytes);
  if (bytes.size() >= 72) {  // header (64) + trailer (8)
    const uint64_t n = bytes.size();
    std::memcpy(bytes.data() + 16, &n, 8);
    const uint32_t crc = channel::crc32c(0, bytes.data(), bytes.size() - 8);
    std::memcpy(bytes.data() + bytes.size() - 8, &crc, 4);
    std::memset(bytes.data() + bytes.size() - 4, 0, 4);
    load(bytes);
  }
  return 0;
}
