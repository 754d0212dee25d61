// The scalar variant of the layer kernels: the references of ops/ themselves (norm,
// activations, attention), the portable fallback.
#include "backend/cpu/layer_kernels.h"
#include "ops/activation.h"
#include "ops/norm.h"

namespace channel {

const LayerKernels* layer_kernels_scalar_variant() {
  static const LayerKernels v{"scalar", rms_norm_ref, silu_glu_ref, gelu_tanh_glu_ref, attend_ref};
  return &v;
}

}  // namespace channel
