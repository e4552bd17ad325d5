#pragma once
// `linkwidth sweep`: the processes and files. Each target runs in a child
// `linkwidth MODE TARGET --json ...` (this same binary): a run drops its
// privileges once its raw socket and capture are open, so one process cannot
// open a second target's; a child also isolates crashes and can be stopped
// when it overruns its budget. The sweep itself opens no sockets and needs no
// privileges.
#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "app/frontends/sweep.hpp"

namespace lw {

// Runs `argv` (argv[0] is only a name; the program is /proc/self/exe) with
// stdin from /dev/null, collecting its stdout and the tail of its stderr.
// Past `budget_s` it gets SIGTERM (it prints its partial document), then
// SIGKILL; when `stop` is set, the signal that set it is forwarded likewise.
// `tick` (may be empty) is called about once a second with the seconds spent.
ChildOutcome run_child(const std::vector<std::string>& argv, double budget_s,
                       const std::atomic<bool>& stop,
                       const std::function<void(double)>& tick = nullptr);

// The whole command: args[0] is "sweep". Returns the exit code.
int run_sweep_main(const std::vector<std::string>& args);

}  // namespace lw
