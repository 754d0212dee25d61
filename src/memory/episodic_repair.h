// repair_store(): drops the damaged records of a `.episodic.mem` file and keeps the rest
// (`channel mem repair`). A record is dropped by the same 4-byte write an eviction makes
// (token_count = 0 in its index entry), so the repair is crash-safe: a repair killed midway
// leaves a valid store with some of the damaged records dropped, and running it again
// finishes. Nothing else in the file is written: no undamaged record is ever rewritten.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace channel {

struct RepairReport {
  std::vector<std::string> dropped;  // one line per dropped record, naming slot and problem
  uint64_t kept = 0;                 // live episodes left, all verified
};

// Takes the writer's lock (a store open for writing in another process is refused). A file
// whose header does not verify is refused (its geometry cannot be trusted, so nothing is
// written). With `dry_run`, reports what would be dropped and writes nothing.
RepairReport repair_store(const std::string& path, bool dry_run = false);

}  // namespace channel
