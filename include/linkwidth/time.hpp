#pragma once
// One time type for the whole program: signed 64-bit nanoseconds.
#include <cstdint>

namespace lw {

using Nanos = std::int64_t;

constexpr Nanos kUs = 1000;
constexpr Nanos kMs = 1000 * kUs;
constexpr Nanos kSec = 1000 * kMs;

inline double to_seconds(Nanos t) { return static_cast<double>(t) / 1e9; }
inline Nanos from_seconds(double s) { return static_cast<Nanos>(s * 1e9); }

// CLOCK_MONOTONIC: pacing and timeouts.
Nanos mono_now();
// CLOCK_REALTIME: the clock pcap stamps packets with; used to put send times and
// capture times on one axis.
Nanos real_now();
// Sleep until an absolute CLOCK_MONOTONIC deadline. Returns false if a signal
// interrupted the sleep early (the caller checks its stop flag and calls again).
bool sleep_until(Nanos mono_deadline);

}  // namespace lw
