// The privilege drop, run in a forked child so the test binary keeps its own
// privileges; the child checks the kernel's view (/proc/self/status) rather
// than trusting drop_privileges()'s own report.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <fstream>
#include <map>
#include <sstream>

#include "app/plumbing/privileges.hpp"
#include "linkwidth/error.hpp"

using namespace lw;

namespace {

std::map<std::string, std::string> proc_status() {
  std::map<std::string, std::string> m;
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string v = line.substr(colon + 1);
    v.erase(0, v.find_first_not_of(" \t"));
    m[line.substr(0, colon)] = v;
  }
  return m;
}

bool all_ids_nonzero(const std::string& ids) {
  std::istringstream in(ids);
  long v = 0;
  int n = 0;
  while (in >> v) {
    if (v == 0) return false;
    ++n;
  }
  return n == 4;  // real, effective, saved, filesystem
}

// Runs in the child: 0 if every check passed, else the number of the failed one.
int child_checks() {
  PrivilegeDrop d;
  try {
    d = drop_privileges();
  } catch (const Error&) {
    return 1;
  }
  if (!d.dropped || !d.no_new_privs) return 2;
  auto st = proc_status();
  for (const char* k : {"CapInh", "CapPrm", "CapEff", "CapAmb"}) {
    if (st[k] != "0000000000000000") return 3;
  }
  if (!all_ids_nonzero(st["Uid"])) return 4;
  if (d.was_root && !all_ids_nonzero(st["Gid"])) return 5;
  if (d.was_root && (st["CapBnd"] != "0000000000000000" || !d.bounding_cleared)) return 6;
  if (st["NoNewPrivs"] != "1") return 7;
  // The kernel agrees: no new raw socket, no way back to root.
  const int fd = socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
  if (fd >= 0 || (errno != EPERM && errno != EACCES)) return 8;
  if (setuid(0) == 0) return 9;
  if (d.to_json()["state"] != "dropped") return 10;
  return 0;
}

}  // namespace

TEST_CASE("drop_privileges leaves no capability and no root identity", "[privileges]") {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) _exit(child_checks());
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  INFO("failed check number " << WEXITSTATUS(status) << " (see child_checks)");
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("without CAP_NET_RAW the check names what is missing", "[privileges]") {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    try {
      drop_privileges();
    } catch (...) {
      _exit(20);
    }
    try {
      require_capture_privileges();
    } catch (const Error& e) {
      const std::string m = e.what();
      const bool ok = e.exit_code() == ExitCode::kPrivilege && e.code() == "privilege" &&
                      m.find("missing CAP_NET_RAW") != std::string::npos &&
                      m.find("setcap cap_net_raw,cap_net_admin+ep /") != std::string::npos &&
                      m.find('\n') == std::string::npos;
      _exit(ok ? 0 : 21);
    }
    _exit(22);  // no error: the check passed without the capability
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

#include <thread>

TEST_CASE("drop_privileges refuses to run beside another thread", "[privileges]") {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::atomic<bool> done{false};
    std::thread t([&] {
      while (!done) usleep(1000);
    });
    int rc = 0;
    try {
      drop_privileges();
      rc = 30;  // dropped for one thread only
    } catch (const Error& e) {
      rc = std::string(e.what()).find("threads") != std::string::npos ? 0 : 31;
    }
    done = true;
    t.join();
    _exit(rc);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
