#include "app/plumbing/signals.hpp"

#include <csignal>

namespace lw {

namespace {
std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};

extern "C" void on_stop(int sig) {
  g_signal.store(sig);
  g_stop.store(true);
}
}  // namespace

const std::atomic<bool>& install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  return g_stop;
}

int stop_signal() { return g_signal.load(); }

}  // namespace lw
