#include "app/frontends/sweep_run.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

#include "app/plumbing/signals.hpp"
#include "linkwidth/error.hpp"

extern char** environ;

namespace lw {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// After SIGTERM (budget) or a forwarded SIGINT, how long the child may take
// to print its partial document before SIGKILL.
constexpr double kGraceS = 5;
constexpr std::size_t kMaxOutput = 64u << 20;

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

[[noreturn]] void input_error(const std::string& sentence) {
  throw Error("usage", sentence, "usage", ExitCode::kUsage);
}

std::string last_line(const std::string& s) {
  std::size_t end = s.find_last_not_of("\n\r ");
  if (end == std::string::npos) return "";
  const std::size_t begin = s.find_last_of('\n', end);
  std::string line = s.substr(begin == std::string::npos ? 0 : begin + 1, end + 1 - (begin + 1));
  if (line.compare(0, 11, "linkwidth: ") == 0) line = line.substr(11);
  return line;
}

// Writes all of `data` to fd, then makes it durable: a record is on disk
// before the next target starts.
void write_all(int fd, const std::string& data, const std::string& name) {
  std::size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error("sweep", "cannot write " + name + ": " + std::strerror(errno));
    off += static_cast<std::size_t>(n);
  }
  ::fdatasync(fd);
}

// Replaces `path` with `records`, one a line (temporary file, then rename).
void rewrite_output(const std::string& path, const std::vector<nlohmann::json>& records) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) input_error("cannot rewrite " + path + ": " + std::strerror(errno) + ".");
  std::string text;
  for (const auto& r : records) text += record_line(r) + "\n";
  write_all(fd, text, tmp);
  ::close(fd);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    input_error("cannot rewrite " + path + ": " + std::strerror(errno) + ".");
  }
}

struct Progress {
  bool on = false;
  void show(const std::string& line) const {
    if (on) std::cerr << "\r" << line << "\x1b[K" << std::flush;
  }
  void clear() const {
    if (on) std::cerr << "\r\x1b[K" << std::flush;
  }
};

}  // namespace

ChildOutcome run_child(const std::vector<std::string>& argv, double budget_s,
                       const std::atomic<bool>& stop, const std::function<void(double)>& tick) {
  ChildOutcome o;
  const auto t0 = Clock::now();
  int outp[2], errp[2];
  if (::pipe2(outp, O_CLOEXEC) != 0) throw Error("sweep", std::string("pipe: ") + strerror(errno));
  if (::pipe2(errp, O_CLOEXEC) != 0) {
    ::close(outp[0]);
    ::close(outp[1]);
    throw Error("sweep", std::string("pipe: ") + strerror(errno));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, outp[1], 1);
  posix_spawn_file_actions_adddup2(&fa, errp[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults, none;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGPIPE);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/proc/self/exe", &fa, &attr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(outp[1]);
  ::close(errp[1]);
  if (rc != 0) {
    ::close(outp[0]);
    ::close(errp[0]);
    throw Error("sweep", std::string("cannot start /proc/self/exe: ") + std::strerror(rc));
  }

  std::string err;
  pollfd fds[2] = {{outp[0], POLLIN, 0}, {errp[0], POLLIN, 0}};
  int open_fds = 2;
  double kill_at = -1;  // seconds since t0 when SIGKILL is due; -1 = not yet
  int status = 0;
  bool reaped = false;
  char buf[65536];
  double next_tick = 1;
  while (!reaped) {
    const double now = seconds_since(t0);
    if (tick && now >= next_tick) {
      tick(now);
      next_tick = now + 1;
    }
    if (stop.load() && !o.interrupted && !o.timed_out) {
      o.interrupted = true;
      ::kill(pid, stop_signal() ? stop_signal() : SIGTERM);
      kill_at = now + kGraceS;
    }
    if (!o.timed_out && !o.interrupted && now > budget_s) {
      o.timed_out = true;
      ::kill(pid, SIGTERM);
      kill_at = now + kGraceS;
    }
    if (kill_at >= 0 && now > kill_at) {
      ::kill(pid, SIGKILL);
      kill_at = now + 3600;  // once
    }
    if (open_fds > 0) {
      const int n = ::poll(fds, 2, 100);
      if (n < 0 && errno != EINTR) break;
      for (auto& p : fds) {
        if (p.fd < 0 || !(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const ssize_t got = ::read(p.fd, buf, sizeof buf);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
          ::close(p.fd);
          p.fd = -1;
          --open_fds;
          continue;
        }
        std::string& dst = p.fd == outp[0] ? o.out : err;
        if (dst.size() < kMaxOutput) dst.append(buf, static_cast<std::size_t>(got));
        if (&dst == &err && err.size() > 8192) err.erase(0, err.size() - 4096);
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) reaped = true;
  }
  for (auto& p : fds) {
    if (p.fd < 0) continue;              // the child is gone: drain what it left
    ::fcntl(p.fd, F_SETFL, O_NONBLOCK);  // without waiting for anything it started
    ssize_t got;
    while ((got = ::read(p.fd, buf, sizeof buf)) > 0) {
      (p.fd == outp[0] ? o.out : err).append(buf, static_cast<std::size_t>(got));
    }
    ::close(p.fd);
  }
  if (!reaped) ::waitpid(pid, &status, 0);
  if (WIFEXITED(status)) o.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) o.term_signal = WTERMSIG(status);
  o.err_tail = last_line(err);
  o.elapsed_s = seconds_since(t0);
  return o;
}

int run_sweep_main(const std::vector<std::string>& args) {
  const SweepOptions o = parse_sweep_cli(args);
  if (o.show_help) {
    std::cout << o.help_text;
    return 0;
  }
  // The target list.
  std::vector<SweepTarget> targets;
  int duplicates = 0;
  const std::string list_name = o.targets == "-" ? "the target list on stdin" : o.targets;
  try {
    if (o.targets == "-") {
      targets = parse_targets(std::cin, o.mode, &duplicates);
    } else {
      std::ifstream in(o.targets);
      if (!in) input_error("cannot read " + o.targets + ": " + std::strerror(errno) + ".");
      targets = parse_targets(in, o.mode, &duplicates);
      if (in.bad()) input_error("cannot read " + o.targets + ": " + std::strerror(errno) + ".");
    }
  } catch (const UsageError& e) {
    input_error(list_name + ", " + e.what());
  }
  if (targets.empty()) input_error(list_name + " names no targets.");
  std::map<std::string, double> budget;  // per mode
  for (const auto& t : targets) {
    if (!budget.count(t.mode)) budget[t.mode] = target_budget_s(o, child_config(o, t.mode));
  }

  // The output: resumed, or new.
  ResumeState st;
  struct stat sb {};
  const bool exists = ::stat(o.output.c_str(), &sb) == 0;
  if (exists && !o.resume && sb.st_size > 0) {
    input_error(o.output + " already holds records; pass --resume to continue that sweep.");
  }
  if (exists && o.resume) {
    std::ifstream in(o.output);
    if (!in) input_error("cannot read " + o.output + ": " + std::strerror(errno) + ".");
    try {
      st = load_resume(in);
    } catch (const UsageError& e) {
      input_error(o.output + ": " + e.what());
    }
    if (st.needs_rewrite) rewrite_output(o.output, st.records);
  }
  const int fd = ::open(o.output.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) input_error("cannot open " + o.output + ": " + std::strerror(errno) + ".");
  if (!o.summary.empty()) {
    std::ofstream probe(o.summary, std::ios::app);
    if (!probe) input_error("cannot write " + o.summary + ": " + std::strerror(errno) + ".");
  }
  const bool notes = !o.quiet;
  if (notes && duplicates > 0) {
    std::cerr << "linkwidth: sweep: " << duplicates << " repeated line(s) in " << list_name
              << " skipped" << std::endl;
  }
  if (notes && (st.dropped_truncated || st.dropped_unfinished)) {
    std::cerr << "linkwidth: sweep: " << o.output << ": dropped " << st.dropped_truncated
              << " cut-off line(s) and " << st.dropped_unfinished
              << " unfinished record(s), measured again" << std::endl;
  }

  const auto& stop = install_stop_handlers();
  Progress progress;
  progress.on = !o.quiet && ::isatty(2);
  std::map<TargetKey, nlohmann::json> by_key;
  for (const auto& r : st.records) by_key[record_key(r)] = r;
  int todo = 0;
  for (const auto& t : targets) todo += !st.done.count({t.target, t.mode});
  const int total = static_cast<int>(targets.size());
  int done = total - todo, measured = 0;
  bool any_failed = false, privilege_stop = false;
  const auto t0 = Clock::now();
  for (std::size_t i = 0; i < targets.size() && !stop.load(); ++i) {
    const SweepTarget& t = targets[i];
    if (st.done.count({t.target, t.mode})) continue;
    if (measured > 0 && o.pause_s > 0) {
      const auto until = Clock::now() + std::chrono::duration<double>(o.pause_s);
      while (Clock::now() < until && !stop.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      if (stop.load()) break;
    }
    // ETA from the targets measured so far, counting down while this one runs.
    const double before = seconds_since(t0);
    const double eta = eta_s(before, measured, todo);
    const auto show = [&](double in_child) {
      progress.show(progress_line(done, total, t, before + in_child, eta - in_child));
    };
    show(0);
    std::vector<std::string> argv = {"linkwidth", t.mode, t.target, "--json"};
    argv.insert(argv.end(), o.child_args.begin(), o.child_args.end());
    const std::string started_at = utc_now();
    const ChildOutcome out = run_child(argv, budget[t.mode], stop,
                                       progress.on ? std::function<void(double)>(show) : nullptr);
    const nlohmann::json rec =
        make_record(t, static_cast<int>(i) + 1, started_at, out, budget[t.mode]);
    write_all(fd, record_line(rec) + "\n", o.output);
    by_key[{t.target, t.mode}] = rec;
    ++measured;
    --todo;
    ++done;
    if (out.interrupted) break;
    if (record_status(rec) != "ok") any_failed = true;
    if (out.exit_code == static_cast<int>(ExitCode::kPrivilege)) {
      // Privileges belong to the binary and the user, not the target: every
      // other target would fail the same way.
      progress.clear();
      std::cerr << "linkwidth: sweep: stopped: " << t.target << " failed for lack of privileges ("
                << out.err_tail << ")" << std::endl;
      privilege_stop = true;
      break;
    }
  }
  ::close(fd);
  progress.clear();

  std::vector<nlohmann::json> summary;
  for (const auto& t : targets) {
    const auto it = by_key.find({t.target, t.mode});
    if (it == by_key.end()) continue;
    summary.push_back(it->second);
    any_failed = any_failed || record_status(it->second) != "ok";
  }
  if (o.summary.empty()) {
    std::cout << summary_table(summary) << std::flush;
  } else {
    std::ofstream csv(o.summary, std::ios::trunc);
    csv << summary_csv(summary);
    if (!csv) std::cerr << "linkwidth: sweep: cannot write " << o.summary << std::endl;
  }
  if (stop.load()) return 128 + (stop_signal() ? stop_signal() : SIGINT);
  if (privilege_stop) return static_cast<int>(ExitCode::kPrivilege);
  return any_failed ? static_cast<int>(ExitCode::kRuntime) : 0;
}

}  // namespace lw
