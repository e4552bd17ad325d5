#pragma once
// The one way the unit tests read a command-line rejection: the UsageError's
// sentence (exit status 2), or "" when the command line was accepted.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "app/frontends/cli.hpp"
#include "linkwidth/error.hpp"

namespace lw::test {

template <class Parse>
std::string usage_rejection(Parse&& parse) {
  try {
    parse();
  } catch (const UsageError& e) {
    CHECK(e.exit_code() == ExitCode::kUsage);
    return e.what();
  }
  return "";
}

// parse_cli's rejection of `args`.
inline std::string rejection(const std::vector<std::string>& args) {
  return usage_rejection([&] { parse_cli(args); });
}

}  // namespace lw::test
