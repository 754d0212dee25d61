// RingCompute's default stored recall: a copy into host staging, checked there.
#include "model/ring_compute.h"

#include <cstring>
#include <vector>

#include "util/error.h"
#include "util/hash.h"

namespace channel {

void RingCompute::check_stored(std::span<const int> layers, uint32_t n_tokens,
                               const StoredKvF16& source) {
  if (source.n_tokens != n_tokens || source.n_planes != 2 * layers.size())
    throw_error("ring: a stored episode of {} tokens in {} planes for {} tokens of {} layers",
                source.n_tokens, source.n_planes, n_tokens, layers.size());
}

void RingCompute::write_recall_stored(std::span<const int> layers, uint32_t slot, uint32_t n_tokens,
                                      const StoredKvF16& source, double rotate_by) {
  check_stored(layers, n_tokens, source);
  const size_t values = source.n_planes * source.plane_values();
  std::vector<uint16_t> own;
  uint16_t* staged = recall_staging(values);
  if (!staged) {
    own.resize(values);
    staged = own.data();
  }
  std::memcpy(staged, source.planes, values * 2);
  // Checked as copied: what is written below is what was verified.
  std::vector<uint32_t> crc(source.n_planes);
  for (size_t p = 0; p < crc.size(); ++p)
    crc[p] = crc32c(0, staged + p * source.plane_values(), source.plane_values() * 2);
  source.verify(crc);
  write_recall_f16(layers, slot, n_tokens, source.row_dim, staged, rotate_by);
}

}  // namespace channel
