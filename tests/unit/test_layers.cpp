// The architecture, checked: each source folder includes only its own
// headers and those of the folders below it (docs/ARCHITECTURE.md, "Folders
// and layers"). CMake builds one static library per folder in the same
// order (a call upwards does not link); this test names the include that
// breaks the order, which the linker would not.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>

namespace fs = std::filesystem;

namespace {

const fs::path kSrc = fs::path(LW_TEST_DATA_DIR) / ".." / ".." / "src";

// Folder -> the folders (by include prefix) its files may include.
const std::map<std::string, std::set<std::string>>& allowed() {
  static const std::set<std::string> base = {"linkwidth", "nlohmann"};
  auto with = [](std::set<std::string> s, std::set<std::string> more) {
    s.insert(more.begin(), more.end());
    return s;
  };
  static const std::set<std::string> pipeline =
      with(base, {"util", "plan", "send", "capture", "match", "estimate", "report"});
  static const std::map<std::string, std::set<std::string>> m = {
      {"util", with(base, {"util"})},
      {"plan", with(base, {"plan"})},
      {"send", with(base, {"plan", "send"})},
      {"capture", with(base, {"plan", "capture"})},
      {"match", with(base, {"plan", "send", "capture", "match"})},
      {"estimate", with(base, {"plan", "send", "capture", "match", "estimate"})},
      {"report", with(base, {"report"})},
      {"app/plumbing", with(pipeline, {"app/plumbing"})},
      {"app/runs", with(pipeline, {"app/plumbing", "app/runs"})},
      {"app/frontends", with(pipeline, {"app/plumbing", "app/runs", "app/frontends"})},
  };
  return m;
}

// "app/runs/x.hpp" -> "app/runs"; "plan/probe.hpp" -> "plan".
std::string folder_of_include(const std::string& inc) {
  const auto slash = inc.find('/');
  if (inc.compare(0, 4, "app/") == 0) return inc.substr(0, inc.find('/', slash + 1));
  return inc.substr(0, slash);
}

}  // namespace

TEST_CASE("every source folder includes only the folders below it", "[layers]") {
  REQUIRE(fs::is_directory(kSrc));
  const std::regex include_re("^\\s*#\\s*include\\s*\"([^\"]+)\"");
  std::set<std::string> seen;
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(kSrc)) {
    if (!e.is_regular_file()) continue;
    const std::string ext = e.path().extension().string();
    if (ext != ".cpp" && ext != ".hpp") continue;
    const std::string rel = fs::relative(e.path(), kSrc).generic_string();
    if (rel.find('/') == std::string::npos) continue;  // main.cpp: the top
    const std::string folder = rel.substr(0, rel.rfind('/'));
    INFO(rel);
    const auto it = allowed().find(folder);
    // A new folder needs its row (and its library in CMakeLists.txt).
    REQUIRE(it != allowed().end());
    seen.insert(folder);
    ++files;
    std::ifstream in(e.path());
    std::string line;
    while (std::getline(in, line)) {
      std::smatch m;
      if (!std::regex_search(line, m, include_re)) continue;
      const std::string inc = m[1];
      if (inc.find('/') == std::string::npos) continue;  // a sibling without a folder
      INFO(line);
      CHECK(it->second.count(folder_of_include(inc)) == 1);
    }
  }
  CHECK(files > 50);
  CHECK(seen.count("app/plumbing") == 1);
  CHECK(seen.count("app/runs") == 1);
  CHECK(seen.count("app/frontends") == 1);
}
