// SIGINT and SIGTERM as a request to stop long work: the command checks stop_signal() between
// steps, saves what it has, prints its summary, and returns stopped_exit_code(): 128 + the
// signal (130 for SIGINT, 143 for SIGTERM), what shells report for a process a signal ended,
// so that scripts see the interruption. A second signal of the same kind ends the process at
// once (the default action is back after the first).
#pragma once

#include <atomic>

namespace channel::cli {

// Catches SIGINT and SIGTERM.
void catch_stop_signals();
// Catches SIGTERM only (`chat` keeps Ctrl-C for interrupting a reply); the signal also sets
// *also (when not null), e.g. the flag that interrupts a reply.
void catch_stop_signal_term(std::atomic<bool>* also = nullptr);
// The signal that asked to stop, 0 while none has come.
int stop_signal();
// "SIGINT" or "SIGTERM".
const char* stop_signal_name();
// 0 while no signal has come, else 128 + the signal.
int stopped_exit_code();

}  // namespace channel::cli
