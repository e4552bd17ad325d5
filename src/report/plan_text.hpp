#pragma once
// A --dry-run document (app/runs/dry_run.hpp) as text.
#include <string>

#include "nlohmann/json.hpp"

namespace lw {

std::string plan_text(const nlohmann::json& plan);

}  // namespace lw
