#pragma once
// Walks a train's schedule against absolute deadlines (t0 + offset_i): sleeps
// until shortly before each deadline, then spins. Records planned and actual
// send times per packet; it never decides what to send.
#include <atomic>
#include <cstdint>
#include <functional>
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
  // --max-rate in IP bits/s (0 = none), a token bucket with bursts of up to
  // kRateBurstBytes (plan/capacity_plan.hpp). A train whose schedule does not
  // fit a full bucket is refused with an Error before anything is sent; at run
  // time a packet waits for its tokens, so catching up after a stall never
  // goes faster either. The bucket lasts across trains.
  double max_rate_bps = 0;
};

class Pacer {
 public:
  Pacer(RawSocket& sock, PacerOptions opt) : sock_(sock), opt_(opt) {}
  // Sends `bytes[i]` (prebuilt for train.probes[i]) on schedule. Stops early,
  // leaving the rest unsent, if *stop becomes true. Throws Error (code
  // max_rate_exceeded) for a train above the peak-rate cap.
  // `between`, if set, runs between two sends now and then: where the pacer
  // would sleep anyway (a gap longer than the spin window), at most every
  // kBetweenEvery; and, on a train sent back to back, every kBetweenForced
  // (the prober drains its capture there: a long train's own packets filled
  // the capture ring before its replies came, app/plumbing/prober.cpp).
  std::vector<SendRecord> send(const Train& train,
                               const std::vector<std::vector<std::uint8_t>>& bytes,
                               const std::atomic<bool>* stop,
                               const std::function<void()>& between = {});
  static constexpr Nanos kBetweenEvery = 1 * kMs;
  static constexpr Nanos kBetweenForced = 10 * kMs;

 private:
  RawSocket& sock_;
  PacerOptions opt_;
  double tokens_ = 0;  // bytes in the --max-rate bucket at last_
  Nanos last_ = -1;    // CLOCK_MONOTONIC of the last send, -1 = none yet (bucket full)
};

}  // namespace lw
