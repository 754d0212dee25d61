// model_signature.h: the model identity `.episodic.mem` stores and session files are bound
// to. The signature is a short text built from a GGUF (docs/memory-format.md, ".episodic.mem",
// "Model signature"); a file stores its FNV-1a 64, and one opened with another model is
// refused.
#pragma once

#include <cstdint>
#include <string>

namespace channel {

class GgufFile;

// "channel-episodic-v1;arch=llama;layers=..;hidden=..;heads=..;kv_heads=..;head_dim=..;
//  vocab=..;tensors=..;tensor_bytes=..;weights_fnv=<16 hex digits>"
std::string model_signature(const GgufFile& gguf);

// fnv1a64(model_signature(gguf)).
uint64_t model_id_hash(const GgufFile& gguf);

}  // namespace channel
