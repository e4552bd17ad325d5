#pragma once
#include <string>
#include <vector>

namespace lw {
// The whole program behind main(): parse, run, render, map errors to exit codes.
int run_main(const std::vector<std::string>& args);
}  // namespace lw
