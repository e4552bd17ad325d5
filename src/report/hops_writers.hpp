#pragma once
// Renderers for HopsResult: JSON first, text second (a table, one line per hop).
#include <string>

#include "nlohmann/json.hpp"
#include "report/hops_result.hpp"

namespace lw {

nlohmann::json to_json(const HopsResult& r);
// The `hops` array and bottleneck fields alone, for embedding in another
// document (e.g. a combined measurement).
nlohmann::json hops_json(const HopsResult& r);
std::string to_text(const HopsResult& r);

}  // namespace lw
