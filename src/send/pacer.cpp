#include "send/pacer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "linkwidth/error.hpp"
#include "plan/capacity_plan.hpp"
#include "send/raw_socket.hpp"

namespace lw {

std::vector<SendRecord> Pacer::send(const Train& train,
                                    const std::vector<std::vector<std::uint8_t>>& bytes,
                                    const std::atomic<bool>* stop,
                                    const std::function<void()>& between) {
  std::vector<SendRecord> rec(train.probes.size());
  const double cap = opt_.max_rate_bps;
  const double burst =
      train.probes.empty() ? kRateBurstBytes : rate_burst_bytes(train.probes.front().dst);
  if (cap > 0) {
    // A safety net independent of the session logic.
    const int over = first_over_rate(train, cap, burst);
    if (over >= 0) {
      char buf[200];
      std::snprintf(buf, sizeof buf,
                    "train %d: packet %d is planned faster than --max-rate %.4g bit/s allows "
                    "(bursts up to %.0f bytes); nothing sent",
                    train.id, over, cap, burst);
      throw Error("send", buf, "max_rate_exceeded");
    }
  }
  // Offset between the two clocks, read back to back; good to well under 1 µs.
  const Nanos m0 = mono_now();
  const Nanos r0 = real_now();
  const Nanos m1 = mono_now();
  const Nanos real_minus_mono = r0 - (m0 + m1) / 2;

  const Nanos t0 = mono_now() + opt_.lead;
  Nanos last_between = t0;
  for (std::size_t i = 0; i < train.probes.size(); ++i) {
    if (stop && stop->load(std::memory_order_relaxed)) break;
    Nanos deadline = t0 + train.probes[i].offset;
    const double len = static_cast<double>(bytes[i].size());
    if (cap > 0 && last_ >= 0) {
      // Not before the bucket holds this packet's bytes again.
      const double missing = len - tokens_;
      if (missing > 0) {
        deadline = std::max(deadline, last_ + static_cast<Nanos>(std::ceil(missing * 8e9 / cap)));
      }
    }
    Nanos now = mono_now();
    if (between && (now - last_between >= kBetweenForced ||
                    (deadline - now > opt_.spin_window && now - last_between >= kBetweenEvery))) {
      between();
      now = last_between = mono_now();
    }
    bool stopped = false;
    while (deadline - now > opt_.spin_window && !stopped) {
      // A signal ends the sleep early: stop at once instead of spinning out
      // the gap and sending one more packet.
      sleep_until(deadline - opt_.spin_window);
      stopped = stop && stop->load(std::memory_order_relaxed);
      now = mono_now();
    }
    if (stopped) break;
    while (now < deadline) now = mono_now();
    rec[i].planned = t0 + train.probes[i].offset;
    rec[i].actual = now;
    rec[i].actual_real = now + real_minus_mono;
    rec[i].sent = sock_.send(bytes[i], train.probes[i].dst);
    if (cap > 0) {
      tokens_ = last_ < 0 ? burst
                          : std::min(burst,
                                     tokens_ + static_cast<double>(now - last_) * cap / 8e9);
      tokens_ -= len;
      last_ = now;
    }
  }
  return rec;
}

}  // namespace lw
