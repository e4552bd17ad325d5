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
};

class Pacer {
 public:
  Pacer(RawSocket& sock, PacerOptions opt) : sock_(sock), opt_(opt) {}
  // Sends `bytes[i]` (prebuilt for train.probes[i]) on schedule. Stops early,
  // leaving the rest unsent, if *stop becomes true.
  std::vector<SendRecord> send(const Train& train,
                               const std::vector<std::vector<std::uint8_t>>& bytes,
                               const std::atomic<bool>* stop);

 private:
  RawSocket& sock_;
  PacerOptions opt_;
};

}  // namespace lw
