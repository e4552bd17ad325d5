#pragma once
// The shaper probe on an open session (estimate/shaper.hpp, plan/shaper_plan.hpp):
// after the capacity trains disagreed the way a token bucket makes them, one
// rate-constant stream of RST load with SYN markers, long enough to empty the
// bucket; a longer one (x4) if the first came back at the rate it was sent
// (the bucket was larger), within --max-bytes and the time cap. Each stream
// starts after an idle that lets the bucket refill and the queue drain.
#include <atomic>
#include <string>

#include "app/config.hpp"
#include "linkwidth/time.hpp"
#include "report/result.hpp"

namespace lw {

struct Session;

// What the capacity trains showed.
struct ShaperHints {
  std::string trigger;      // rate_drop, negative_offset, replies_stopped
  double fast_bps = 0;      // rate of the (short) trains that fit the bucket
  double slow_bps = 0;      // rate of the slow train, or the estimate (0: unknown)
  double fast_bytes = 0;    // bytes of the trains that came back fast: the bucket holds about that
  double queued_bytes = 0;  // bytes of the last train, possibly still queued
};

// Sends the streams and reads them. Sends nothing once `stop` is set or
// past t_cap.
ShaperRecord run_shaper_probe(Session& s, const Config& c, const std::atomic<bool>& stop,
                              Nanos t_cap, const ShaperHints& hints);

// Puts the probe's record into the result: when a bucket was found, the
// capacity becomes its sustained rate (capacity_source "shaper_stream") and
// the warning `token_bucket` says so; `shaper_not_emptied` when every stream
// came back at the rate it was sent.
void apply_shaper(const ShaperRecord& rec, CapacityResult& res);

}  // namespace lw
