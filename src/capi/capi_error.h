// The C API's thread-local last-error message, for the parts of the API defined outside
// channel_capi.cpp (channel_model_load_default lives with the embedded model).
#pragma once

#include <string>

namespace channel::capi {

void set_last_error(std::string message);  // "" clears it

}  // namespace channel::capi
