// Standard base64 (RFC 4648, with '=' padding): OpenAI's encoding_format "base64" sends an
// embedding as the base64 of its little-endian float32 bytes.
#pragma once

#include <span>
#include <string>

namespace channel {

std::string base64_encode(std::span<const unsigned char> bytes);

}  // namespace channel
