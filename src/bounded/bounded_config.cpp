// validate_bounded_cfg: every check a header-derived bounded geometry must pass.
#include "bounded/bounded_config.h"

#include "util/error.h"

namespace channel {

void validate_bounded_cfg(const BoundedAttnCfg& c, std::string_view where) {
  if (c.n_heads <= 0 || c.n_kv_heads <= 0 || c.head_dim <= 0) {
    throw_error(
        "{}: head counts and head_dim must be positive (n_heads {}, n_kv_heads {}, "
        "head_dim {})",
        where, c.n_heads, c.n_kv_heads, c.head_dim);
  }
  if (c.n_heads % c.n_kv_heads != 0) {
    throw_error("{}: n_heads {} is not a multiple of n_kv_heads {}", where, c.n_heads,
                c.n_kv_heads);
  }
  if (c.window <= 0 || c.window > BOUNDED_MAX_WINDOW) {
    throw_error("{}: window W = {} must be in [1, {}]", where, c.window, BOUNDED_MAX_WINDOW);
  }
  if (c.n_sinks < 0 || c.n_sinks > BOUNDED_MAX_SINKS) {
    throw_error("{}: sink_count S = {} must be in [0, {}]", where, c.n_sinks, BOUNDED_MAX_SINKS);
  }
  if (c.rope_dims < 0 || c.rope_dims > c.head_dim || c.rope_dims % 2 != 0) {
    throw_error("{}: rope dimension_count rd = {} must be even and in [0, head_dim = {}]", where,
                c.rope_dims, c.head_dim);
  }
  if (c.rope == nullptr || c.rope->window() != c.window || c.rope->half() != c.rope_dims / 2) {
    throw_error("{}: rotation table does not match W = {}, rd = {}", where, c.window, c.rope_dims);
  }
  if (!(c.attn_scale > 0.0f)) throw_error("{}: attention scale must be positive", where);
}

}  // namespace channel
