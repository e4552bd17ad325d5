#include "estimate/capacity.hpp"

#include <algorithm>
#include <random>

#include "estimate/stats.hpp"
#include "match/match.hpp"
#include "plan/probe.hpp"

namespace lw {

const char* verdict_name(SampleVerdict v) {
  switch (v) {
    case SampleVerdict::kKept:
      return "kept";
    case SampleVerdict::kLostReply:
      return "lost_reply";
    case SampleVerdict::kReordered:
      return "reordered";
    case SampleVerdict::kUnsent:
      return "unsent";
    case SampleVerdict::kSendStall:
      return "send_stall";
    case SampleVerdict::kNotCompressed:
      return "not_compressed";
    case SampleVerdict::kBadDispersion:
      return "bad_dispersion";
  }
  return "?";
}

TrainTiming timing_of(const Train& train, const TrainOutcome& outcome) {
  TrainTiming t;
  if (train.markers.empty()) return t;
  const int first = train.markers.front();
  const int last = train.markers.back();
  for (int i = first; i <= last; ++i) {
    const Probe& p = train.probes[i];
    const ProbeOutcome& o = outcome.probes[i];
    const bool is_marker = std::find(train.markers.begin(), train.markers.end(), i) !=
                           train.markers.end();
    t.bits.push_back(8.0 * p.ip_len);
    t.sent.push_back(o.sent);
    t.marker.push_back(is_marker);
    t.reply.push_back(is_marker ? o.reply : 0);
    t.left.push_back(o.left);
    t.planned.push_back(p.offset);
  }
  for (int i = first - 1; i >= 0 && train.probes[i].role == Role::kDrain; --i) {
    t.lead_bits += 8.0 * train.probes[i].ip_len;
  }
  t.duplicates = outcome.duplicate_replies;
  return t;
}

CapacitySample evaluate_capacity_train(const TrainTiming& t, const CapacityFilter& f) {
  CapacitySample s;
  const std::size_t n = t.bits.size();
  if (n < 2 || t.sent.size() != n || t.reply.size() != n || t.marker.size() != n ||
      !t.marker.front() || !t.marker.back()) {
    s.verdict = SampleVerdict::kBadDispersion;
    return s;
  }
  for (Nanos x : t.sent) {
    if (x == 0) {
      s.verdict = SampleVerdict::kUnsent;
      return s;
    }
  }
  // Replies must all be there and in send order.
  Nanos prev = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!t.marker[i]) continue;
    if (t.reply[i] == 0) {
      s.verdict = SampleVerdict::kLostReply;
      return s;
    }
    if (t.reply[i] < prev) {
      s.verdict = SampleVerdict::kReordered;
      return s;
    }
    prev = t.reply[i];
  }
  double bits_after_head = 0;
  for (std::size_t i = 1; i < n; ++i) bits_after_head += t.bits[i];
  const Nanos reply_disp = t.reply.back() - t.reply.front();
  const Nanos send_disp = t.sent.back() - t.sent.front();
  s.reply_dispersion_s = to_seconds(reply_disp);
  s.send_dispersion_s = to_seconds(send_disp);
  if (reply_disp <= 0) {
    s.verdict = SampleVerdict::kBadDispersion;
    return s;
  }
  s.capacity_bps = bits_after_head / s.reply_dispersion_s;
  if (t.left.size() == n && t.left.front() != 0 && t.left.back() > t.left.front()) {
    s.left_dispersion_s = to_seconds(t.left.back() - t.left.front());
  }
  s.offered_bps = send_disp > 0 ? bits_after_head / s.send_dispersion_s : 0;

  // Busy-bottleneck check: packet i reaches the bottleneck (same path delay for
  // all) no later than the bottleneck finishes the bits sent after the head and
  // before i, at the rate this sample claims. Later means the link idled and
  // the dispersion measures our stall, not the link.
  double bits_before = 0;
  double worst = 0;
  for (std::size_t i = 1; i < n; ++i) {
    const double lag = to_seconds(t.sent[i] - t.sent.front()) - bits_before / s.capacity_bps;
    worst = std::max(worst, lag);
    bits_before += t.bits[i];
  }
  s.max_send_lag_s = worst;
  if (static_cast<double>(send_disp) * f.min_compression > static_cast<double>(reply_disp)) {
    s.verdict = SampleVerdict::kNotCompressed;
  } else if (worst > to_seconds(f.stall_tolerance) + t.lead_bits / s.capacity_bps) {
    s.verdict = SampleVerdict::kSendStall;
  }
  return s;
}

CapacityEstimate aggregate_capacity(const std::vector<double>& kept) {
  CapacityEstimate e;
  e.samples = static_cast<int>(kept.size());
  if (kept.empty()) return e;
  const KdeMode m = kde_mode(kept);
  const Interval ci = bootstrap_mode_interval(kept);
  e.valid = true;
  e.capacity_bps = m.mode;
  e.kde_bandwidth_bps = m.bandwidth;
  e.low_bps = std::min(ci.low, m.mode);
  e.high_bps = std::max(ci.high, m.mode);
  return e;
}

}  // namespace lw

namespace lw {

double dispersion_location(const std::vector<double>& d) { return quantile(d, 0.25); }

namespace {
double rel_half_width(const CapacityEstimate& e) {
  return e.capacity_bps > 0 ? (e.high_bps - e.low_bps) / (2 * e.capacity_bps) : 1e9;
}
}  // namespace

bool prefer_per_train(const CapacityEstimate& slope, const CapacityEstimate& per_train,
                      double precision) {
  if (!per_train.valid) return false;
  if (!slope.valid) return true;
  const double w = rel_half_width(slope);
  return w > std::max(0.10, 2 * precision) && w > rel_half_width(per_train);
}

SlopeEstimate estimate_capacity_slope(const std::vector<double>& sd, double sbits,
                                      const std::vector<double>& ld, double lbits) {
  SlopeEstimate out;
  out.capacity.samples = static_cast<int>(sd.size() + ld.size());
  if (sd.empty() || ld.empty() || lbits <= sbits) return out;
  auto slope_cap = [&](double ds, double dl) { return dl > ds ? (lbits - sbits) / (dl - ds) : 0.0; };
  const double ms = dispersion_location(sd), ml = dispersion_location(ld);
  const double c = slope_cap(ms, ml);
  if (c <= 0) return out;
  out.capacity.valid = true;
  out.capacity.capacity_bps = c;
  out.capacity.kde_bandwidth_bps = 0;
  out.offset_s = ms - sbits / c;

  std::mt19937 rng(12345);
  std::vector<double> caps;
  std::vector<double> rs, rl;
  for (int b = 0; b < 300; ++b) {
    rs.resize(sd.size());
    rl.resize(ld.size());
    std::uniform_int_distribution<std::size_t> ps(0, sd.size() - 1), pl(0, ld.size() - 1);
    for (auto& x : rs) x = sd[ps(rng)];
    for (auto& x : rl) x = ld[pl(rng)];
    const double cb = slope_cap(dispersion_location(rs), dispersion_location(rl));
    if (cb > 0) caps.push_back(cb);
  }
  if (caps.size() < 10) {
    out.capacity.low_bps = out.capacity.high_bps = c;
    return out;
  }
  out.capacity.low_bps = std::min(c, quantile(caps, 0.025));
  out.capacity.high_bps = std::max(c, quantile(caps, 0.975));
  return out;
}

}  // namespace lw
