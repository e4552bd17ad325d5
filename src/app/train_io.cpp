#include "app/train_io.hpp"

#include "app/session.hpp"

namespace lw {

TrainRun LiveTrainIo::run(const Train& train, const std::vector<int>& wait_for, Nanos reply_timeout,
                          bool any, Nanos busy_wait) {
  p_.note(
      {{"kind", "train"}, {"phase", phase_}, {"train", train.id}, {"probes", train.probes.size()}});
  auto done = [&](const TrainRun& r) {
    p_.note({{"kind", "train_done"},
             {"train", train.id},
             {"start_mono", r.start_mono},
             {"end_mono", r.end_mono}});
  };
  if (session_ && config_) {
    return run_train(*session_, *config_, train, wait_for, reply_timeout, t_cap_, any, busy_wait,
                     done)
        .run;
  }
  TrainRun r = p_.run(train, wait_for, reply_timeout, any, busy_wait);
  done(r);
  return r;
}

Nanos LiveTrainIo::now() {
  const Nanos t = mono_now();
  p_.note({{"kind", "clock"}, {"mono", t}});
  return t;
}

void LiveTrainIo::wait_until(Nanos mono) {
  while (mono_now() < mono && !stop_.load()) sleep_until(mono);
}

unsigned LiveTrainIo::capture_drops() {
  const unsigned n = p_.capture_stats().dropped;
  p_.note({{"kind", "drops"}, {"phase", phase_}, {"count", n}});
  return n;
}

bool LiveTrainIo::stopped() {
  ++checks_;
  const bool s = stop_.load();
  if (s && !stop_noted_) {
    // The replay answers "stopped" from this check on.
    p_.note({{"kind", "stop"}, {"check", checks_}});
    stop_noted_ = true;
  }
  return s;
}

}  // namespace lw
