#include <string>
#include <vector>

#include "app/frontends/main_app.hpp"

int main(int argc, char** argv) {
  return lw::run_main(std::vector<std::string>(argv + 1, argv + argc));
}
