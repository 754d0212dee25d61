#include "cli_signals.h"

#include <csignal>

namespace channel::cli {
namespace {

volatile std::sig_atomic_t g_stop_signal = 0;
std::atomic<bool>* g_also = nullptr;
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

void on_stop_signal(int sig) {
  g_stop_signal = sig;
  if (g_also) g_also->store(true);
}

void catch_signal(int sig) {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sa.sa_flags = SA_RESETHAND;  // a second one takes the default action: the process ends
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, nullptr);
}

}  // namespace

void catch_stop_signals() {
  catch_signal(SIGINT);
  catch_signal(SIGTERM);
}

void catch_stop_signal_term(std::atomic<bool>* also) {
  g_also = also;
  catch_signal(SIGTERM);
}

int stop_signal() {
  return g_stop_signal;
}

const char* stop_signal_name() {
  return g_stop_signal == SIGTERM ? "SIGTERM" : "SIGINT";
}

int stopped_exit_code() {
  return g_stop_signal ? 128 + g_stop_signal : 0;
}

}  // namespace channel::cli
