#pragma once
// Command line -> validated Config. Throws UsageError with one clear sentence.
#include <string>
#include <vector>

#include "app/config.hpp"

namespace lw {

struct CliResult {
  Config config;
  bool show_help = false;
  bool show_version = false;
  std::string help_text;
};

CliResult parse_cli(const std::vector<std::string>& args);

// Throws UsageError(sentence) unless `ok` (every front-end's checks).
void require(bool ok, const std::string& sentence);

// "50M" -> 50e6; "1.5G" -> 1.5e9; plain numbers pass. Throws UsageError.
double parse_si(const std::string& text, const std::string& what);

}  // namespace lw
