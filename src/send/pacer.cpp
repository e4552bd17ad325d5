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
                                    const std::atomic<bool>* stop) {
  std::vector<SendRecord> rec(train.probes.size());
  const double cap = opt_.max_rate_bps;
  if (cap > 0) {
    // A safety net independent of the session logic: 1 ppm for float rounding.
    const double peak = planned_peak_rate(train);
    if (peak > cap * (1 + 1e-6)) {
      char buf[160];
      std::snprintf(buf, sizeof buf,
                    "train %d plans a peak rate of %.4g bit/s, above --max-rate %.4g bit/s; "
                    "nothing sent",
                    train.id, peak, cap);
      throw Error("send", buf, "max_rate_exceeded");
    }
  }
  // Offset between the two clocks, read back to back; good to well under 1 µs.
  const Nanos m0 = mono_now();
  const Nanos r0 = real_now();
  const Nanos m1 = mono_now();
  const Nanos real_minus_mono = r0 - (m0 + m1) / 2;

  const Nanos t0 = mono_now() + opt_.lead;
  Nanos not_before = 0;  // under the cap: previous send + its bits at the cap
  for (std::size_t i = 0; i < train.probes.size(); ++i) {
    if (stop && stop->load(std::memory_order_relaxed)) break;
    const Nanos deadline = std::max(t0 + train.probes[i].offset, not_before);
    Nanos now = mono_now();
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
      not_before = now + static_cast<Nanos>(std::ceil(8.0 * static_cast<double>(bytes[i].size()) * 1e9 / cap));
    }
  }
  return rec;
}

}  // namespace lw
