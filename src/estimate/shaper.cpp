#include "estimate/shaper.hpp"

#include "estimate/stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace lw {

namespace {

// Least squares t = a + b·x over points [lo, hi) (x in Mbit, t in seconds).
struct Line {
  double a = 0;
  double b = 0;      // seconds per Mbit
  double sse = 0;
  double sxx = 0;    // centred sum of squares of x (for the slope's error)
  int n = 0;
  bool ok = false;
};

Line fit(const std::vector<double>& x, const std::vector<double>& y, int lo, int hi) {
  Line l;
  l.n = hi - lo;
  if (l.n < 2) return l;
  double mx = 0, my = 0;
  for (int i = lo; i < hi; ++i) {
    mx += x[i];
    my += y[i];
  }
  mx /= l.n;
  my /= l.n;
  double sxy = 0;
  for (int i = lo; i < hi; ++i) {
    l.sxx += (x[i] - mx) * (x[i] - mx);
    sxy += (x[i] - mx) * (y[i] - my);
  }
  if (l.sxx <= 0) return l;
  l.b = sxy / l.sxx;
  l.a = my - l.b * mx;
  for (int i = lo; i < hi; ++i) {
    const double r = y[i] - (l.a + l.b * x[i]);
    l.sse += r * r;
  }
  l.ok = true;
  return l;
}

// Residual standard deviation of a line, floored (timestamps are not better
// than a couple of microseconds, and a two-point line has no residual).
double sigma(const Line& l) {
  constexpr double kFloor = 2e-6;
  if (l.n <= 2) return kFloor;
  return std::max(kFloor, std::sqrt(l.sse / (l.n - 2)));
}

// How much later each reply interval came than the spacing around it
// predicts: against the slower of the four intervals before and the four
// after (`late`: a shift from burst to sustained rate is not late), and
// against the faster (`early`: nor is one from sustained rate to
// overflow early). Seconds.
struct IntervalExcess {
  std::vector<double> late, early;
};
IntervalExcess interval_excess(const std::vector<double>& x, const std::vector<double>& y) {
  const int m = static_cast<int>(x.size()) - 1;
  std::vector<double> slope(static_cast<std::size_t>(std::max(0, m)));
  for (int i = 0; i < m; ++i) slope[i] = (y[i + 1] - y[i]) / (x[i + 1] - x[i]);
  constexpr int kSide = 4;
  IntervalExcess e;
  for (int i = 0; i < m; ++i) {
    std::vector<double> refs;
    if (i > 0) refs.push_back(median({slope.begin() + std::max(0, i - kSide), slope.begin() + i}));
    if (i + 1 < m) {
      refs.push_back(median({slope.begin() + i + 1, slope.begin() + std::min(m, i + 1 + kSide)}));
    }
    const double hi = refs.empty() ? 0 : *std::max_element(refs.begin(), refs.end());
    const double lo = refs.empty() ? 0 : *std::min_element(refs.begin(), refs.end());
    e.late.push_back(y[i + 1] - y[i] - hi * (x[i + 1] - x[i]));
    e.early.push_back(y[i + 1] - y[i] - lo * (x[i + 1] - x[i]));
  }
  return e;
}

// A stall: a reply interval more than twice as long as its bits take
// at the spacing of the intervals around it (the slower of the four before
// and the four after: a shift from burst to sustained rate is not a stall,
// nor the burst of refilled tokens after one), and longer by at least
// `min_pause_s`. The fitted lines would take it for a slower rate.
void find_stall(const std::vector<double>& x, const std::vector<double>& y, double min_pause_s,
                ShaperFinding& f) {
  const std::vector<double> excess = interval_excess(x, y).late;
  for (std::size_t i = 0; i < excess.size(); ++i) {
    const double expected = y[i + 1] - y[i] - excess[i];
    if (excess[i] > std::max(expected, min_pause_s)) {
      f.paused = true;
      f.pause_s = std::max(f.pause_s, excess[i]);
    }
  }
}

// A step: one reply interval later than the spacing around it predicts by
// far more than the intervals' own scatter (6 robust standard deviations,
// and min_step_s), and not caught up within the next three. Every later reply carries
// it: the path passed nothing for that while (a burst of cross traffic
// through the shaper, a VM's scheduler) and then went on at its rate. One
// such step left in the sustained line is noise the size of the step, and
// hid a 30 KB burst at 100 Mbit/s (2.2 ms ahead of the sustained line)
// behind a 4-7 ms step: "no level shift", "burst within the timing noise"
// (the lab, 25 Mbit/s of UDP through the tbf: 4 runs in 30). Up to
// `max_steps` are taken out of `y`; a curve with more is ragged (bursty
// cross traffic) and is left as it came. Returns how many.
int remove_steps(const std::vector<double>& x, std::vector<double>& y, double min_step_s,
                 int max_steps) {
  constexpr double kMadToSd = 1.4826;  // a normal's SD per median absolute deviation
  constexpr double kStepPaceRatio = 1.5;
  const int m = static_cast<int>(x.size()) - 1;
  if (m < 8) return 0;
  const IntervalExcess ex = interval_excess(x, y);
  const std::vector<double>& excess = ex.late;
  std::vector<double> abs_excess;
  // (Scatter: an interval's distance from the nearer of the two spacings
  // around it.)
  for (int i = 0; i < m; ++i) {
    abs_excess.push_back(std::min(std::fabs(ex.late[i]), std::fabs(ex.early[i])));
  }
  const double sd = kMadToSd * median(abs_excess);
  const double threshold = std::max(6 * sd, min_step_s);
  // What stays of a step after the next three intervals' catch-up (a
  // reply late on its own, the ones after it on time, is no step).
  auto net = [&](int i) {
    double later = 0, catch_up = 0;
    for (int k = i + 1; k < std::min(m, i + 4); ++k) {
      later += ex.early[k];
      catch_up = std::min(catch_up, later);
    }
    return excess[i] + catch_up;
  };
  // ... and the scatter of the four intervals before it and of the four
  // after it, the larger: a step stands out of quiet neighbours on both
  // sides (a ragged stretch, or the start of one, has none). A side of
  // four without its largest interval: the one where the rate shifts, from
  // burst to sustained or to overflow, lies between two spacings.
  auto near_sd = [&](int i) {
    double sd_near = 0;
    for (const auto& [lo, hi] : {std::pair{std::max(0, i - 4), i}, std::pair{i + 1, std::min(m, i + 5)}}) {
      std::vector<double> side(abs_excess.begin() + lo, abs_excess.begin() + std::max(lo, hi));
      std::sort(side.begin(), side.end());
      if (side.size() == 4) side.pop_back();
      if (!side.empty()) sd_near = std::max(sd_near, kMadToSd * median(side));
    }
    return sd_near;
  };
  // ... and with the same pace on both sides: where the replies' spacing
  // per bit before and after differs by more than kStepPaceRatio, the rate
  // shifted there (burst to sustained: a 3 MB bucket at 100 Mbit/s whose
  // stream had few sustained intervals before its overflow read the shift
  // as a step, took it out, and the bucket was "not emptied").
  auto pace = [&](int lo, int hi) {
    std::vector<double> p;
    for (int k = std::max(0, lo); k < std::min(m, hi); ++k) {
      if (x[k + 1] > x[k]) p.push_back((y[k + 1] - y[k]) / (x[k + 1] - x[k]));
    }
    return p.empty() ? 0.0 : median(p);
  };
  auto same_pace = [&](int i) {
    const double before = pace(i - 4, i), after = pace(i + 1, i + 5);
    return before > 0 && after > 0 && std::max(before, after) <= kStepPaceRatio * std::min(before, after);
  };
  std::vector<std::pair<int, double>> steps;
  for (int i = 0; i < m; ++i) {
    const double step = net(i);
    if (step > threshold && step > 6 * near_sd(i) && same_pace(i)) steps.emplace_back(i, step);
  }
  if (steps.empty() || static_cast<int>(steps.size()) > max_steps) return 0;
  for (const auto& [i, step] : steps) {
    for (int j = i + 1; j <= m; ++j) y[j] -= step;
  }
  return static_cast<int>(steps.size());
}

// Our own sending stood still early in the stream: an interval between two
// markers' send times longer than the stream's usual spacing for those bits
// by `min_gap_s`, over which a bucket refilling at `rate_bps` gains more
// than a quarter of the bits sent so far. Before the bucket empties that
// hands the shaper a new burst in mid-stream (a busy host's 4 ms scheduler
// tick at 25 KB into a 30 KB bucket at 100 Mbit/s refills 50 KB): the reply
// curve no longer shows the bucket. Returns the bits (after the head) where
// the stall began, or 0. Unknown send times: none found.
double early_send_stall(const std::vector<double>& x, const std::vector<Nanos>& sent,
                        double rate_bps, double min_gap_s) {
  const int m = static_cast<int>(x.size()) - 1;
  if (m < 2 || !(rate_bps > 0)) return 0;
  std::vector<double> per_bit;  // seconds of sending per Mbit
  for (int i = 0; i < m; ++i) {
    if (sent[i] <= 0 || sent[i + 1] <= sent[i]) return 0;
    per_bit.push_back(to_seconds(sent[i + 1] - sent[i]) / (x[i + 1] - x[i]));
  }
  const double usual = median(per_bit);
  for (int i = 0; i < m; ++i) {
    const double excess = to_seconds(sent[i + 1] - sent[i]) - usual * (x[i + 1] - x[i]);
    if (excess > min_gap_s && rate_bps * excess > 0.25 * x[i + 1] * 1e6) return x[i] * 1e6;
  }
  return 0;
}

struct Model {
  int s = 0;  // burst = [0, s) (0: none)
  int e = 0;  // sustained = [s, e), overflow = [e, n)
  Line burst, sustained, overflow;
  double cost = std::numeric_limits<double>::infinity();
};

}  // namespace

double shaper_drain_time_s(double bucket_bytes, double rate_bps, double offered_bps) {
  if (offered_bps <= rate_bps) return std::numeric_limits<double>::infinity();
  return 8.0 * bucket_bytes / (offered_bps - rate_bps);
}

namespace {

ShaperFinding detect_shaper_once(const std::vector<ShaperPoint>& points, double offered_bps,
                                 const ShaperOptions& opt, bool take_steps_out);

}  // namespace

ShaperFinding detect_shaper(const std::vector<ShaperPoint>& points, double offered_bps,
                            const ShaperOptions& opt) {
  // The curve as it came first; with its steps taken out only where that
  // found no bucket. Steps out of a curve that shows one can only move it:
  // a 3 MB bucket at 100 Mbit/s whose queue overflowed 1.2 MB after the
  // shift had one 0.6 ms step in its overflow taken out, and the refit put
  // the overflow three points early and the sustained phase "too short".
  const ShaperFinding plain = detect_shaper_once(points, offered_bps, opt, false);
  if (plain.found || opt.max_steps <= 0) return plain;
  ShaperFinding stepped = detect_shaper_once(points, offered_bps, opt, true);
  return stepped.found ? stepped : plain;
}

namespace {

ShaperFinding detect_shaper_once(const std::vector<ShaperPoint>& points, double offered_bps,
                                 const ShaperOptions& opt, bool take_steps_out) {
  ShaperFinding f;
  f.offered_bps = offered_bps;
  // Usable points: answered, in send order, replies not running backwards (a
  // reordered reply is dropped). The first answered marker is the origin.
  std::vector<double> x, y;  // Mbit after the origin, seconds after its reply
  std::vector<Nanos> sent;   // when each was sent (0: unknown)
  double x0 = 0;
  Nanos t0 = 0;
  Nanos last = 0;
  for (const ShaperPoint& p : points) {
    if (p.reply == 0) continue;
    if (x.empty()) {
      x0 = p.bits;
      t0 = p.reply;
    } else if (p.reply < last || p.bits <= x0 + x.back() * 1e6) {
      continue;
    }
    last = p.reply;
    sent.push_back(p.sent);
    x.push_back((p.bits - x0) / 1e6);
    y.push_back(to_seconds(p.reply - t0));
  }
  const int n = static_cast<int>(x.size());
  f.points = n;
  if (n < 5) {
    f.reason = "too few replies";
    return f;
  }
  find_stall(x, y, to_seconds(opt.min_pause), f);
  if (take_steps_out) f.steps_removed = remove_steps(x, y, to_seconds(opt.min_step), opt.max_steps);

  // Every model of up to three phases (burst, sustained, overflow), each
  // phase a line: the burst is faster than the sustained phase, the overflow
  // (markers at the send spacing behind a full queue) too. A penalised fit
  // (BIC with a noise floor) picks how many phases the points support. The
  // overflow has a noise of its own: its replies keep our own send stalls
  // (milliseconds on a busy host), and with one noise for all phases a noisy
  // overflow hid a clean 30 KB burst at 100 Mbit/s (4 points 1.7 ms ahead of
  // the sustained line: "no level shift"). Burst and sustained share one, as
  // before: a burst of 2-4 points fits its own line down to the timestamps'
  // floor, and a noise of its own would weigh where the shift lies on that
  // alone (one CI run after a per-phase version read a 50 Mbit/s peak as 38;
  // not reproduced in 10 lab runs nor 800 simulated streams, where both
  // versions agree).
  const double floor_var = 2e-6 * 2e-6;
  auto phase_cost = [&](double sse, int count) {
    return count > 0 ? count * std::log(std::max(sse, count * floor_var) / count) : 0.0;
  };
  auto cost_of = [&](const Line& burst, const Line& sus, const Line& over, int params) {
    return phase_cost(burst.sse + sus.sse, burst.n + sus.n) + phase_cost(over.sse, over.n) +
           params * std::log(static_cast<double>(n));
  };
  Model best;
  for (int s = 0; s <= n - 3; ++s) {
    if (s == 1) continue;  // a burst needs two points (the head and one more)
    Line burst;
    if (s >= 2) {
      burst = fit(x, y, 0, s);
      if (!burst.ok) continue;
    }
    for (int e = s + 3; e <= n; ++e) {
      if (n - e == 1) continue;
      const Line sus = fit(x, y, s, e);
      if (!sus.ok || sus.b <= 0) continue;
      if (s >= 2 && !(burst.b * opt.min_shift < sus.b)) continue;
      Line over;
      if (e < n) {
        over = fit(x, y, e, n);
        if (!over.ok || !(over.b * opt.min_shift < sus.b)) continue;
      }
      // A line per phase and where it begins; one noise, and the overflow's.
      const int params = 3 + (s >= 2 ? 3 : 0) + (e < n ? 4 : 0);
      const double c = cost_of(burst, sus, over, params);
      if (c < best.cost) {
        best.cost = c;
        best.s = s;
        best.e = e;
        best.burst = burst;
        best.sustained = sus;
        best.overflow = over;
      }
    }
  }
  if (!std::isfinite(best.cost)) {
    f.reason = "no rising reply curve";
    return f;
  }
  f.dropped_tail = n - best.e;
  if (best.e < n) f.overflow_bits = x[best.e] * 1e6 + x0;
  const Line& sus = best.sustained;
  // One line through the used points: the stream's received rate.
  const Line all = fit(x, y, 0, best.e);
  if (all.ok && all.b > 0) f.stream_rate_bps = 1e6 / all.b;
  {
    // The slower of the stream's and the sustained phase's rates refills the
    // bucket (a burst speeds the first; a stall-made shift the second).
    double r = f.stream_rate_bps;
    if (sus.b > 0) r = r > 0 ? std::min(r, 1e6 / sus.b) : 1e6 / sus.b;
    f.send_stall_bits = early_send_stall(x, sent, r, to_seconds(opt.min_send_stall));
    if (f.send_stall_bits > 0) f.send_stall_bits += x0;
  }
  if (best.s == 0) {
    f.uncompressed = offered_bps > 0 && f.stream_rate_bps >= 0.9 * offered_bps;
    f.reason = "no level shift";
    return f;
  }
  // The sustained line extended back to the head: it passes the head reply
  // B'/R late, where B' is what the bucket held.
  const double bucket_bits = -sus.a / sus.b * 1e6;
  const double sig = sigma(sus);
  const double threshold = std::max(opt.noise_sigmas * sig, to_seconds(opt.min_burst_time));
  // The burst phase arrives behind the sustained line's extension (which
  // passes bits 0 at -B'/R): the head by -a, the other burst points by less
  // the nearer they are to the shift.
  double most_late = 0;
  for (int i = 1; i < best.s; ++i) {
    most_late = std::max(most_late, y[i] - (sus.a + sus.b * x[i]));
  }
  f.rate_bps = 1e6 / sus.b;
  f.peak_bps = 1e6 / best.burst.b;
  f.bucket_bytes = bucket_bits / 8;
  f.burst_points = best.s;
  if (bucket_bits / 8 < opt.min_bucket_bytes) {
    f.reason = "burst too small";
    return f;
  }
  {
    // What we offered over the sustained phase: the rate it came back at must
    // be a compression of it, not our own slower sending. Asked before its
    // length: a short "sustained phase" at a stream's end that we sent no
    // faster is our own stall, and no reason to send a stream after it (an
    // unshaped 1 Gbit/s lab path: 10 MB back at 960 Mbit/s, its last markers
    // at 617, a third stream of 14.7 MB that found nothing).
    const int a = best.s, z = best.e - 1;
    if (sent[a] > 0 && sent[z] > sent[a]) {
      const double sender_bps = (x[z] - x[a]) * 1e6 / to_seconds(sent[z] - sent[a]);
      if (sender_bps < opt.min_send_excess * f.rate_bps) {
        f.sender_limited = true;
        f.reason = "the sustained phase came at our own sending rate";
        return f;
      }
    }
  }
  if (sus.n < opt.min_sustained_points) {
    f.reason = "sustained phase too short";
    return f;
  }
  if (-sus.a < threshold || most_late < threshold) {
    f.reason = "burst within the timing noise";
    return f;
  }
  if (best.s >= 2) {
    // The burst's replies cannot come back faster than we sent those bits
    // (a bucket passes them at most at the rate they arrive): a "burst"
    // far faster, by more than the timing noise, is replies bunched on the
    // way back behind a late head (a busy host, a delay element that
    // stalled; a 14 Gbit/s peak in the lab).
    const int z = best.s - 1;
    if (sent[0] > 0 && sent[z] > sent[0]) {
      const double send_span = to_seconds(sent[z] - sent[0]);
      const double burst_sent_bps = x[z] * 1e6 / send_span;
      // By more than the timing noise (a burst of 10 KB passes in 80 us), or
      // by far more than any bucket's noise came to in the simulator (1.6x)
      // and more than min_burst_time (the lab's bunches: 13x and more, on a
      // busy VM whose replies' noise hid them from the first test).
      const double ratio = f.peak_bps / burst_sent_bps;
      const double shorter = send_span - (y[z] - y[0]);
      if ((ratio > opt.max_peak_over_sent && shorter > threshold) ||
          (ratio > 4 * opt.max_peak_over_sent && shorter > to_seconds(opt.min_burst_time))) {
        f.reason = "the burst came back faster than we sent it";
        return f;
      }
    }
  }
  if (f.paused) {
    f.reason = kStoodStill;
    return f;
  }
  const double se = sig / std::sqrt(sus.sxx);
  f.rate_low_bps = 1e6 / (sus.b + 2 * se);
  f.rate_high_bps = sus.b > 2 * se ? 1e6 / (sus.b - 2 * se) : std::numeric_limits<double>::infinity();
  if (!(f.rate_high_bps - f.rate_low_bps <= 2 * opt.max_rate_spread * f.rate_bps)) {
    f.reason = "sustained rate too noisy";
    return f;
  }
  f.found = true;
  f.reason.clear();
  f.peak_at_offered = offered_bps > 0 && f.peak_bps >= 0.9 * offered_bps;
  // Where the two lines cross.
  const double xs = (sus.a - best.burst.a) / (best.burst.b - sus.b);
  f.shift_time = from_seconds(best.burst.a + best.burst.b * xs);
  return f;
}

}  // namespace

}  // namespace lw

namespace lw {

bool rate_drop_suggests_bucket(double sizing_bps, double later_bps, double min_shift) {
  return sizing_bps > 0 && later_bps > 0 && later_bps * min_shift < sizing_bps;
}

bool lost_replies_suggest_bucket(int later, int early, int recent) {
  return recent >= 2 && later >= 2 * early;
}

bool offset_suggests_bucket(double offset_s, double capacity_bps, int packet_size,
                            double min_bucket_bytes) {
  if (capacity_bps <= 0 || offset_s >= 0) return false;
  const double packets_time = 4 * 8.0 * packet_size / capacity_bps;
  return -offset_s > std::max(300e-6, packets_time) &&
         -offset_s * capacity_bps / 8 >= min_bucket_bytes;
}

RefillSample refill_sample(const ShaperFinding& f, double rate_bps, double bucket_bytes,
                           double tau_s, const ShaperOptions& opt, double tail_wait_s) {
  RefillSample r;
  if (!(tau_s > 0) || !(rate_bps > 0) || !(tail_wait_s >= 0) || tail_wait_s > tau_s) {
    return r;
  }
  const double D = tail_wait_s;
  auto avail = [&](double content) {
    return std::clamp((8.0 * content + rate_bps * D) / (tau_s + D), 0.0, rate_bps);
  };
  if (f.found && f.rate_bps > 0) {
    r.content_bytes = rate_bps * f.bucket_bytes / f.rate_bps;
    r.saturated = bucket_bytes > 0 && r.content_bytes > 0.8 * bucket_bytes;
    r.availbw_bps = avail(r.content_bytes);
    r.ok = !r.saturated;
    return r;
  }
  // No burst: the whole stream came back at about the sustained rate, the
  // bucket held less than the detector can see (the other flows spent
  // nearly every token).
  if (f.points >= opt.min_sustained_points && f.stream_rate_bps > 0 &&
      f.stream_rate_bps < 1.2 * rate_bps &&
      (f.reason == "no level shift" || f.reason == "burst too small" ||
       f.reason == "burst within the timing noise")) {
    r.ok = true;
    if (f.reason == "burst too small" && f.rate_bps > 0 && f.bucket_bytes > 0) {
      r.content_bytes = rate_bps * f.bucket_bytes / f.rate_bps;
    }
    r.availbw_bps = avail(r.content_bytes);
    r.upper_bps = avail(opt.min_bucket_bytes);
  }
  return r;
}

bool refill_left_tokens(const RefillSample& s, double rate_bps, double peak_bps, double tau_s,
                        double tail_wait_s, double excess_bytes, double packet_bytes) {
  if (!(rate_bps > 0) || !(peak_bps > rate_bps)) return false;
  const bool leftover =
      s.ok && 8.0 * s.content_bytes > 1.05 * rate_bps * tau_s + 16.0 * packet_bytes;
  const double queued_s = 8.0 * excess_bytes * (1 - rate_bps / peak_bps) / rate_bps;
  const bool tail_free = tail_wait_s < 0.3 * queued_s;
  return leftover || (tail_free && !s.saturated);
}

bool refill_contradicts_bucket(const RefillSample& s, const ShaperFinding& read, double rate_bps,
                               double bucket_bytes, double tau_s, bool not_emptied,
                               const ShaperOptions& opt) {
  if (not_emptied) return true;
  if (s.saturated) {
    // (Unknown bucket or idle: as before, the idle is taken as sized to 60%.)
    if (!(bucket_bytes > 0) || !(tau_s > 0) || !(rate_bps > 0)) return true;
    return rate_bps * tau_s / 8 < 2.0 / 3.0 * bucket_bytes;
  }
  return !s.ok && !read.found && rate_bps > 0 && read.points >= opt.min_sustained_points &&
         read.stream_rate_bps >= 1.2 * rate_bps;
}

bool bucket_may_be_larger(double peak_bps, double rate_bps) {
  return rate_bps > 0 && peak_bps >= 3 * rate_bps;
}

double bucket_hint_bytes(double fast_bytes, double largest_fast_bytes, double span_s,
                         double slow_bps) {
  // (0: not known, as the sum.)
  const double largest =
      largest_fast_bytes > 0 ? std::min(largest_fast_bytes, fast_bytes) : fast_bytes;
  if (!(slow_bps > 0) || !(span_s > 0)) return std::max(largest, fast_bytes);
  return std::max(largest, fast_bytes - slow_bps * span_s / 8);
}

bool shift_refuted_by_whole_stream(double shift_bytes, double rate_bps, double whole_bytes,
                                   double whole_bps) {
  if (!(shift_bytes > 0) || !(rate_bps > 0) || !(whole_bytes > 0) || !(whole_bps > 0)) {
    return false;
  }
  return shift_bytes < whole_bytes && whole_bps > 1.1 * rate_bps;
}

}  // namespace lw
