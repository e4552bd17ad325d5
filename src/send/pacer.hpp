#pragma once
// Walks a train's schedule against absolute deadlines (t0 + offset_i): sleeps
// until shortly before each deadline, then spins. Records planned and actual
// send times per packet; it never decides what to send.
#include <atomic>
#include <cstdint>
#include <vector>

#include "linkwidth/time.hpp"
#include "plan/probe.hpp"

namespace lw {

class RawSocket;

struct SendRecord {
  Nanos planned = 0;      // CLOCK_MONOTONIC deadline
  Nanos actual = 0;       // CLOCK_MONOTONIC, read right before sendto
  Nanos actual_real = 0;  // the same instant on CLOCK_REALTIME (pcap's clock)
  bool sent = false;
};

struct PacerOptions {
  Nanos spin_window = 60 * kUs;  // sleep until this long before a deadline, then spin
  Nanos lead = 200 * kUs;        // t0 = now + lead, so the first deadline is not already late
  // Peak-rate cap in IP bits/s (0 = none). A train whose schedule asks for more
  // (plan/capacity_plan.hpp planned_peak_rate) is refused with an Error before
  // anything is sent, and a packet never leaves earlier than the previous one's
  // bits at this rate after it, also when the pacer catches up after a stall.
  double max_rate_bps = 0;
};

class Pacer {
 public:
  Pacer(RawSocket& sock, PacerOptions opt) : sock_(sock), opt_(opt) {}
  // Sends `bytes[i]` (prebuilt for train.probes[i]) on schedule. Stops early,
  // leaving the rest unsent, if *stop becomes true. Throws Error (code
  // max_rate_exceeded) for a train above the peak-rate cap.
  std::vector<SendRecord> send(const Train& train,
                               const std::vector<std::vector<std::uint8_t>>& bytes,
                               const std::atomic<bool>* stop);

 private:
  RawSocket& sock_;
  PacerOptions opt_;
};

}  // namespace lw
