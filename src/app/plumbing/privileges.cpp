#include "app/plumbing/privileges.hpp"

#include <dirent.h>
#include <grp.h>
#include <pwd.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>

#include "linkwidth/error.hpp"

namespace lw {

namespace {

using CapPtr = std::unique_ptr<std::remove_pointer_t<cap_t>, int (*)(void*)>;

CapPtr current_caps() {
  CapPtr c(cap_get_proc(), cap_free);
  if (!c) throw Error("privileges", std::string("cap_get_proc: ") + std::strerror(errno));
  return c;
}

bool has_flag(cap_t caps, cap_value_t cap, cap_flag_t set) {
  cap_flag_value_t v = CAP_CLEAR;
  return cap_get_flag(caps, cap, set, &v) == 0 && v == CAP_SET;
}

std::string self_path() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "linkwidth";
  return std::string(buf, static_cast<std::size_t>(n));
}

[[noreturn]] void fail(const std::string& step) {
  throw Error("privileges", "dropping privileges failed at " + step + ": " + std::strerror(errno),
              "privilege_drop_failed");
}

int thread_count() {
  DIR* d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  while (const dirent* e = readdir(d)) n += e->d_name[0] != '.' ? 1 : 0;
  closedir(d);
  return n;
}

// Highest capability number the running kernel knows (CAP_LAST_CAP may lag).
int last_cap() {
  int c = 0;
  while (c < 63 && prctl(PR_CAPBSET_READ, c + 1, 0, 0, 0) >= 0) ++c;
  return c;
}

// The uid/gid a root process switches to.
void unprivileged_identity(uid_t ruid, uid_t* uid, gid_t* gid) {
  // sudo tells us who asked; trust it only when the real uid is root (not in a
  // set-uid binary started by someone else, who could name any uid).
  const char* su = std::getenv("SUDO_UID");
  const char* sg = std::getenv("SUDO_GID");
  if (ruid == 0 && su && sg) {
    char* end1 = nullptr;
    char* end2 = nullptr;
    const unsigned long u = std::strtoul(su, &end1, 10);
    const unsigned long g = std::strtoul(sg, &end2, 10);
    if (*su && *end1 == 0 && *sg && *end2 == 0 && u != 0 && g != 0 && u < 0xffffffffUL &&
        g < 0xffffffffUL) {
      *uid = static_cast<uid_t>(u);
      *gid = static_cast<gid_t>(g);
      return;
    }
  }
  *uid = 65534;
  *gid = 65534;
  if (const passwd* pw = getpwnam("nobody")) {
    *uid = pw->pw_uid;
    *gid = pw->pw_gid;
  }
  if (const group* gr = getgrnam("nogroup")) *gid = gr->gr_gid;
  if (*uid == 0 || *gid == 0) {
    errno = EINVAL;
    fail("choosing an unprivileged user (nobody maps to 0)");
  }
}

}  // namespace

void require_capture_privileges() {
  CapPtr caps = current_caps();
  if (has_flag(caps.get(), CAP_NET_RAW, CAP_EFFECTIVE)) return;
  if (has_flag(caps.get(), CAP_NET_RAW, CAP_PERMITTED)) {
    // Permitted but not effective (e.g. setcap ...+p): raise what we may.
    cap_value_t want[2] = {CAP_NET_RAW, CAP_NET_ADMIN};
    const int n = has_flag(caps.get(), CAP_NET_ADMIN, CAP_PERMITTED) ? 2 : 1;
    if (cap_set_flag(caps.get(), CAP_EFFECTIVE, n, want, CAP_SET) == 0 &&
        cap_set_proc(caps.get()) == 0) {
      return;
    }
  }
  const bool admin = has_flag(caps.get(), CAP_NET_ADMIN, CAP_EFFECTIVE) ||
                     has_flag(caps.get(), CAP_NET_ADMIN, CAP_PERMITTED);
  throw Error("privileges",
              std::string("missing CAP_NET_RAW") + (admin ? "" : " (and CAP_NET_ADMIN)") +
                  ", needed for the raw socket and the packet capture: run as root, or grant "
                  "them once with: sudo setcap cap_net_raw,cap_net_admin+ep " +
                  self_path(),
              "privilege", ExitCode::kPrivilege);
}

PrivilegeDrop drop_privileges() {
  PrivilegeDrop r;
  // Capability sets belong to threads (cap_set_proc changes the caller's
  // only): a second thread would keep everything we drop here.
  if (const int n = thread_count(); n > 1) {  // -1: no /proc, nothing to check
    errno = EBUSY;
    fail("the start (" + std::to_string(n) + " threads; drop before starting any)");
  }
  uid_t ruid, euid, suid;
  gid_t rgid, egid, sgid;
  if (getresuid(&ruid, &euid, &suid) != 0) fail("getresuid");
  if (getresgid(&rgid, &egid, &sgid) != 0) fail("getresgid");
  r.was_root = ruid == 0 || euid == 0 || suid == 0;

  // 0. No execve may grant privileges again (set-uid, file capabilities). First,
  // so nobody who sees the capabilities gone sees this still open.
  r.no_new_privs = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0;
  // 1. Bounding set: only with CAP_SETPCAP, so before the permitted set goes.
  const int last = last_cap();
  bool bounding = true;
  for (int c = 0; c <= last; ++c) {
    if (prctl(PR_CAPBSET_READ, c, 0, 0, 0) > 0 && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0) {
      bounding = false;
    }
  }
  // 2. Ambient set: clearing needs no privilege (EINVAL before Linux 4.3).
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) {
    fail("clearing the ambient capabilities");
  }
  // 3. Identity: groups first (needs CAP_SETGID), then gid, then uid. Moving
  // every uid away from 0 also clears the permitted and effective sets.
  if (r.was_root) {
    uid_t uid;
    gid_t gid;
    unprivileged_identity(ruid, &uid, &gid);
    if (setgroups(1, &gid) != 0) fail("setgroups");
    if (setresgid(gid, gid, gid) != 0) fail("setresgid");
    if (setresuid(uid, uid, uid) != 0) fail("setresuid");
  }
  // 4. Whatever file capabilities gave us (or root kept): every set empty.
  CapPtr none(cap_init(), cap_free);
  if (!none || cap_set_proc(none.get()) != 0) fail("cap_set_proc");

  // 5. Read everything back.
  if (getresuid(&ruid, &euid, &suid) != 0) fail("getresuid");
  if (getresgid(&rgid, &egid, &sgid) != 0) fail("getresgid");
  r.uid = euid;
  r.gid = egid;
  if (const passwd* pw = getpwuid(euid))
    r.user = pw->pw_name;
  else
    r.user = std::to_string(euid);
  bool any_bound = false;
  for (int c = 0; c <= last; ++c) any_bound = any_bound || prctl(PR_CAPBSET_READ, c, 0, 0, 0) > 0;
  r.bounding_cleared = bounding && !any_bound;
  bool ambient = false;
  for (int c = 0; c <= last; ++c) {
    ambient = ambient || prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, c, 0, 0) > 0;
  }
  CapPtr now = current_caps();
  const bool caps_empty = cap_compare(now.get(), none.get()) == 0;
  if (ruid == 0 || euid == 0 || suid == 0)
    r.problem = "a uid is still 0";
  else if (r.was_root && (rgid == 0 || egid == 0 || sgid == 0))
    r.problem = "a gid is still 0";
  else if (!caps_empty)
    r.problem = "capabilities are still set";
  else if (ambient)
    r.problem = "ambient capabilities are still set";
  r.dropped = r.problem.empty();
  if (!r.dropped) {
    throw Error("privileges", "dropping privileges failed: " + r.problem, "privilege_drop_failed");
  }
  return r;
}

nlohmann::json PrivilegeDrop::to_json() const {
  return {{"state", dropped ? "dropped" : "kept"},
          {"was_root", was_root},
          {"uid", uid},
          {"gid", gid},
          {"user", user},
          {"bounding_set", bounding_cleared ? "cleared" : "kept"},
          {"no_new_privs", no_new_privs}};
}

}  // namespace lw
