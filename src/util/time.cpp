#include "linkwidth/time.hpp"

#include <cerrno>
#include <ctime>

namespace lw {

static Nanos read_clock(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<Nanos>(ts.tv_sec) * kSec + ts.tv_nsec;
}

Nanos mono_now() { return read_clock(CLOCK_MONOTONIC); }
Nanos real_now() { return read_clock(CLOCK_REALTIME); }

bool sleep_until(Nanos mono_deadline) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(mono_deadline / kSec);
  ts.tv_nsec = static_cast<long>(mono_deadline % kSec);
  return clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) != EINTR;
}

}  // namespace lw
