#include "report/warning_codes.hpp"

namespace lw {

const std::vector<WarningInfo>& warning_catalogue() {
  static const std::vector<WarningInfo> all = {
#define LW_X(e, name, meaning) {WarningCode::e, name, meaning},
      LW_WARNING_CODES(LW_X)
#undef LW_X
  };
  return all;
}

const char* warning_name(WarningCode code) {
  return warning_catalogue()[static_cast<std::size_t>(code)].name;
}

}  // namespace lw
