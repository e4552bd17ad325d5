#include "app/main_app.hpp"

#include <cstdio>
#include <iostream>

#include "app/availbw_run.hpp"
#include "app/capacity_run.hpp"
#include "app/cli.hpp"
#include "app/hops_run.hpp"
#include "app/signals.hpp"
#include "linkwidth/error.hpp"
#include "report/hops_writers.hpp"
#include "report/writers.hpp"

namespace lw {

namespace {

int fail(const Config& c, const std::string& type, const ErrorInfo& err, ExitCode code) {
  if (c.json) {
    std::cout << error_json(type, c.target, err, nullptr).dump(2) << std::endl;
  }
  std::cerr << "linkwidth: " << err.message << std::endl;
  return static_cast<int>(code);
}

int run_hops_main(const Config& c) {
  if (c.dry_run) {
    const auto plan = plan_hops(c);
    if (c.json) std::cout << plan.dump(2) << std::endl;
    else std::cout << plan_text(plan);
    return 0;
  }
  const HopsResult r = run_hops(c, install_stop_handlers());
  if (c.json) std::cout << to_json(r).dump(2) << std::endl;
  else std::cout << to_text(r);
  if (r.stop_reason == "interrupted") return 128 + stop_signal();
  if (r.bottleneck_hop == 0) return static_cast<int>(ExitCode::kRuntime);
  return 0;
}

}  // namespace

int run_main(const std::vector<std::string>& args) {
  Config cfg;
  // Best effort: know --json even if parsing fails, so errors stay valid JSON.
  for (const auto& a : args) cfg.json = cfg.json || a == "--json" || a == "-J";
  CliResult cli;
  try {
    cli = parse_cli(args);
  } catch (const UsageError& e) {
    std::string msg = e.what();
    msg = msg.substr(msg.find(": ") + 2);
    return fail(cfg, "error", {"usage", msg}, ExitCode::kUsage);
  }
  if (cli.show_help) {
    std::cout << cli.help_text;
    return 0;
  }
  if (cli.show_version) {
    std::cout << "linkwidth " << LINKWIDTH_VERSION << std::endl;
    return 0;
  }
  const Config& c = cli.config;
  try {
    if (c.command == "hops") return run_hops_main(c);
    if (c.dry_run) {
      const auto plan = plan_capacity(c);
      if (c.json) std::cout << plan.dump(2) << std::endl;
      else std::cout << plan_text(plan);
      return 0;
    }
    const auto& stop = install_stop_handlers();
    if (c.command != "capacity") {
      const MeasureResult m = run_measure(c, stop);
      if (c.json) std::cout << to_json(m).dump(2) << std::endl;
      else std::cout << to_text(m);
      if (m.availbw.stop_reason == "interrupted" || m.capacity.stop_reason == "interrupted") {
        return 128 + stop_signal();
      }
      if (!m.availbw.valid) return static_cast<int>(ExitCode::kRuntime);
      return 0;
    }
    const CapacityResult r = run_capacity(c, stop);
    if (c.json) std::cout << to_json(r).dump(2) << std::endl;
    else std::cout << to_text(r);
    if (r.stop_reason == "interrupted") return 128 + stop_signal();
    if (!r.valid) return static_cast<int>(ExitCode::kRuntime);
    return 0;
  } catch (const Error& e) {
    return fail(c, c.command, {e.code(), e.what()}, e.exit_code());
  } catch (const std::exception& e) {
    return fail(c, c.command, {"internal", std::string("internal error: ") + e.what()},
                ExitCode::kRuntime);
  }
}

}  // namespace lw
