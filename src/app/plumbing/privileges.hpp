#pragma once
// Privileges: a check that says exactly what is missing before the raw socket
// and the capture are opened, and the drop of every capability and any root
// identity once they are open (neither needs privileges after open: sendto on
// an open raw socket and reads/stats on an open pcap handle are not checked).
//
//   require_capture_privileges();          // throws Error(privilege, exit 3)
//   RawSocket s(...); LiveCapture cap(...);
//   const PrivilegeDrop d = drop_privileges();  // throws if a step fails
#include <string>

#include "nlohmann/json.hpp"

namespace lw {

// Throws Error("privileges", ..., "privilege", ExitCode::kPrivilege) naming the
// missing capability and the setcap command, unless CAP_NET_RAW is effective
// (raised from the permitted set if it is only there).
void require_capture_privileges();

struct PrivilegeDrop {
  bool dropped = false;   // verified: no capability in any set, no uid 0
  bool was_root = false;  // some uid was 0 before: we switched identity
  unsigned uid = 0;       // real = effective = saved after the drop
  unsigned gid = 0;
  std::string user;               // name of uid, or its number
  bool bounding_cleared = false;  // needs CAP_SETPCAP (root has it, file caps do not)
  bool no_new_privs = false;      // execve can never grant privileges again
  std::string problem;            // why `dropped` is false, empty otherwise

  nlohmann::json to_json() const;
};

// Clears the capability bounding set (when allowed) and the ambient set; when
// any uid is 0 switches to SUDO_UID/SUDO_GID (if set, non-zero and the real uid
// is 0) or else to nobody/nogroup with setgroups, setresgid and setresuid;
// clears the permitted, effective and inheritable sets; sets no_new_privs; then
// reads everything back. Throws Error("privileges", ...) if a step that must
// work fails: running on with privileges we meant to shed is worse than stopping.
PrivilegeDrop drop_privileges();

}  // namespace lw
