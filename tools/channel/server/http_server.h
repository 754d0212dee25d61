// `channel serve`'s HTTP server: cpp-httplib, bound to 127.0.0.1 by default. Every request
// passes the API key check (401) and the body size limit (413); every error is an OpenAI
// JSON error; a handler that throws never takes the server down.
#pragma once

#include "server/server_config.h"

namespace channel::server {

// Serves until SIGINT / SIGTERM; returns the exit code. Prints the address once listening.
int run_server(ServerConfig config);

}  // namespace channel::server
