#include "app/frontends/main_app.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "app/frontends/analyze.hpp"
#include "app/runs/availbw_run.hpp"
#include "app/runs/capacity_run.hpp"
#include "app/runs/dry_run.hpp"
#include "app/frontends/cli.hpp"
#include "app/runs/hops_run.hpp"
#include "app/plumbing/signals.hpp"
#include "app/frontends/sweep_run.hpp"
#include "linkwidth/error.hpp"
#include "report/hops_writers.hpp"
#include "report/plan_text.hpp"
#include "report/writers.hpp"

namespace lw {

namespace {

// Invalid UTF-8 (a target given in another encoding) becomes U+FFFD instead of
// an exception: the document stays valid JSON.
std::string dump(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

// --save-pcap names a file we create: a bad path fails before anything is
// sent (the capture rewrites it once open).
void require_creatable(const std::string& path) {
  if (path.empty()) return;
  std::FILE* f = std::fopen(path.c_str(), "ab");
  if (!f) {
    throw Error("usage",
                "--save-pcap " + path + ": cannot create the file: " + std::strerror(errno) + ".",
                "unwritable_file", ExitCode::kUsage);
  }
  std::fclose(f);
}

int fail(const Config& c, const std::string& type, const ErrorInfo& err, ExitCode code) {
  if (c.json) {
    std::cout << dump(error_json(type, c.target, err, nullptr)) << std::endl;
  }
  std::cerr << "linkwidth: " << err.message << std::endl;
  return static_cast<int>(code);
}

int run_hops_main(const Config& c) {
  if (c.dry_run) {
    const auto plan = plan_hops(c);
    if (c.json)
      std::cout << plan.dump(2) << std::endl;
    else
      std::cout << plan_text(plan);
    return 0;
  }
  const HopsResult r = run_hops(c, install_stop_handlers());
  if (c.json)
    std::cout << to_json(r).dump(2) << std::endl;
  else
    std::cout << to_text(r);
  if (r.stop_reason == StopReason::kInterrupted) return 128 + stop_signal();
  if (r.bottleneck_hop == 0) return static_cast<int>(ExitCode::kRuntime);
  return 0;
}

// `sweep` has its own options and writes its records to a file: errors are
// one sentence on stderr.
int run_sweep_command(const std::vector<std::string>& args) {
  try {
    return run_sweep_main(args);
  } catch (const Error& e) {
    std::cerr << "linkwidth: " << e.report() << std::endl;
    return static_cast<int>(e.exit_code());
  } catch (const std::exception& e) {
    std::cerr << "linkwidth: sweep: internal error: " << e.what() << std::endl;
    return static_cast<int>(ExitCode::kRuntime);
  }
}

}  // namespace

int run_main(const std::vector<std::string>& args) {
  switch (front_end(args)) {
    case FrontEnd::kSweep:
      return run_sweep_command(args);
    case FrontEnd::kAnalyze:
      return run_analyze_main(args);
    case FrontEnd::kMeasure:
      break;
  }
  Config cfg;
  // Best effort: know --json even if parsing fails, so errors stay valid JSON.
  for (const auto& a : args) cfg.json = cfg.json || a == "--json" || a == "-J";
  CliResult cli;
  try {
    cli = parse_cli(args);
  } catch (const UsageError& e) {
    return fail(cfg, "error", {"usage", e.what()}, ExitCode::kUsage);
  } catch (const std::exception& e) {
    return fail(cfg, "error", {"usage", std::string("cannot parse the command line: ") + e.what()},
                ExitCode::kUsage);
  }
  if (cli.show_help) {
    std::cout << cli.help_text;
    return 0;
  }
  if (cli.show_version) {
    if (cli.config.json) {
      std::cout << nlohmann::json{{"type", "version"},
                                  {"version", LINKWIDTH_VERSION},
                                  {"commit", LINKWIDTH_COMMIT}}
                       .dump()
                << std::endl;
    } else {
      std::cout << "linkwidth " << LINKWIDTH_VERSION << " (" << LINKWIDTH_COMMIT << ")"
                << std::endl;
    }
    return 0;
  }
  const Config& c = cli.config;
  try {
    if (c.command == Command::kHops) return run_hops_main(c);
    if (c.dry_run) {
      const auto plan = plan_capacity(c);
      if (c.json)
        std::cout << dump(plan) << std::endl;
      else
        std::cout << plan_text(plan);
      return 0;
    }
    require_creatable(c.save_pcap);
    const auto& stop = install_stop_handlers();
    if (c.command != Command::kCapacity) {
      const MeasureResult m = run_measure(c, stop);
      if (c.json)
        std::cout << dump(to_json(m)) << std::endl;
      else
        std::cout << to_text(m);
      if (m.availbw.stop_reason == StopReason::kInterrupted ||
          m.capacity.stop_reason == StopReason::kInterrupted) {
        return 128 + stop_signal();
      }
      if (!m.availbw.valid) return static_cast<int>(ExitCode::kRuntime);
      return 0;
    }
    const CapacityResult r = run_capacity(c, stop);
    if (c.json)
      std::cout << dump(to_json(r)) << std::endl;
    else
      std::cout << to_text(r);
    if (r.stop_reason == StopReason::kInterrupted) return 128 + stop_signal();
    if (!r.valid) return static_cast<int>(ExitCode::kRuntime);
    return 0;
  } catch (const Error& e) {
    const std::string msg = e.report();
    if (e.exit_code() == ExitCode::kInterrupted && stop_signal() != 0) {
      fail(c, name(c.command), {e.code(), msg}, e.exit_code());
      return 128 + stop_signal();  // the usual code: 130 for SIGINT, 143 for SIGTERM
    }
    return fail(c, name(c.command), {e.code(), msg}, e.exit_code());
  } catch (const std::exception& e) {
    return fail(c, name(c.command), {"internal", std::string("internal error: ") + e.what()},
                ExitCode::kRuntime);
  }
}

}  // namespace lw
