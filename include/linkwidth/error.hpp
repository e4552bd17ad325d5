#pragma once
// Typed errors thrown only at setup boundaries; main() turns them into a message
// and an exit code. The hot path returns status instead.
#include <stdexcept>
#include <string>

namespace lw {

enum class ExitCode : int {
  kOk = 0,
  kRuntime = 1,    // measurement failed (target filtered, unreachable, ...)
  kUsage = 2,      // bad command line or value
  kPrivilege = 3,  // missing CAP_NET_RAW / CAP_NET_ADMIN
  kInterrupted = 130,
};

class Error : public std::runtime_error {
 public:
  Error(std::string component, const std::string& what, std::string code = "error",
        ExitCode exit = ExitCode::kRuntime)
      : std::runtime_error(what),
        component_(std::move(component)),
        code_(std::move(code)),
        exit_(exit) {}
  // what() is the bare sentence; the component names where it arose.
  const std::string& component() const { return component_; }
  // "component: sentence", as a runtime failure is reported (usage errors
  // are reported bare: they speak of the command line, not a component).
  std::string report() const {
    return component_ == "usage" ? std::string(what()) : component_ + ": " + what();
  }
  // Stable machine-readable name, e.g. "target_filtered".
  const std::string& code() const { return code_; }
  ExitCode exit_code() const { return exit_; }

 private:
  std::string component_;
  std::string code_;
  ExitCode exit_;
};

// A bad command line or value: one clear sentence, exit code 2.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& what)
      : Error("usage", what, "usage", ExitCode::kUsage) {}
};

}  // namespace lw
