// The warning catalogue (report/warning_codes.hpp) and the README's table.
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "report/result.hpp"
#include "report/warning_codes.hpp"

using namespace lw;

namespace {

// The rows of the README's "## Warnings" table: code -> meaning.
std::map<std::string, std::string> readme_table() {
  std::ifstream in(std::string(LW_TEST_DATA_DIR) + "/../../README.md");
  REQUIRE(in);
  std::map<std::string, std::string> rows;
  std::string line;
  bool in_section = false;
  const std::regex row("^\\| `([a-z_]+)` \\| (.*) \\|$");
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) in_section = line == "## Warnings";
    std::smatch m;
    if (in_section && std::regex_match(line, m, row)) rows[m[1]] = m[2];
  }
  return rows;
}

}  // namespace

TEST_CASE("every catalogued warning code is unique and in the README's table", "[warnings]") {
  const auto table = readme_table();
  std::set<std::string> names;
  for (const WarningInfo& w : warning_catalogue()) {
    INFO(w.name);
    CHECK(names.insert(w.name).second);
    CHECK(std::string(warning_name(w.code)) == w.name);
    REQUIRE(table.count(w.name) == 1);
    CHECK(table.at(w.name) == w.meaning);
  }
  // And nothing in the table that the code cannot emit.
  CHECK(table.size() == warning_catalogue().size());
}

TEST_CASE("a warning carries its catalogued name; a recorded one stays as written", "[warnings]") {
  const Warning w(WarningCode::kCaptureDrops, "3 packets dropped by the capture buffer");
  CHECK(w.code == "capture_drops");
  const Warning r = Warning::recorded("some_old_code", "as recorded");
  CHECK(r.code == "some_old_code");
  CHECK(r.message == "as recorded");
}
