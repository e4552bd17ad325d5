#pragma once
#include <atomic>

namespace lw {

// Installs SIGINT/SIGTERM handlers (without SA_RESTART, so sleeps wake up) and
// returns the flag they set. The one piece of process-wide state: a signal
// handler can reach nothing else.
const std::atomic<bool>& install_stop_handlers();
int stop_signal();  // the signal that set the flag, 0 if none

}  // namespace lw
