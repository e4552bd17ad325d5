#include "send/pacer.hpp"

#include "send/raw_socket.hpp"

namespace lw {

std::vector<SendRecord> Pacer::send(const Train& train,
                                    const std::vector<std::vector<std::uint8_t>>& bytes,
                                    const std::atomic<bool>* stop) {
  std::vector<SendRecord> rec(train.probes.size());
  // Offset between the two clocks, read back to back; good to well under 1 µs.
  const Nanos m0 = mono_now();
  const Nanos r0 = real_now();
  const Nanos m1 = mono_now();
  const Nanos real_minus_mono = r0 - (m0 + m1) / 2;

  const Nanos t0 = mono_now() + opt_.lead;
  for (std::size_t i = 0; i < train.probes.size(); ++i) {
    if (stop && stop->load(std::memory_order_relaxed)) break;
    const Nanos deadline = t0 + train.probes[i].offset;
    Nanos now = mono_now();
    if (deadline - now > opt_.spin_window) {
      sleep_until(deadline - opt_.spin_window);
      now = mono_now();
    }
    while (now < deadline) now = mono_now();
    rec[i].planned = deadline;
    rec[i].actual = now;
    rec[i].actual_real = now + real_minus_mono;
    rec[i].sent = sock_.send(bytes[i], train.probes[i].dst);
  }
  return rec;
}

}  // namespace lw
