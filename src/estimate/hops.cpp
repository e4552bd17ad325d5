#include "estimate/hops.hpp"

#include <algorithm>
#include <cmath>

#include "estimate/stats.hpp"

namespace lw {

double hop_dispersion(const HopTrainTiming& t, int k) {
  const Nanos h = t.head_reply[k], tl = t.tail_reply[k];
  if (h == 0 || tl == 0 || tl <= h) return 0;
  return to_seconds(tl - h);
}

namespace {

// The train's offered spacing per bit: median over hops of the send-time
// dispersion of that hop's markers (they are all sent at one rate).
double sent_level(const HopTrainTiming& t) {
  std::vector<double> v;
  for (std::size_t k = 0; k < t.bits.size(); ++k) {
    if (t.head_sent[k] == 0 || t.tail_sent[k] <= t.head_sent[k] || t.bits[k] <= 0) continue;
    v.push_back(to_seconds(t.tail_sent[k] - t.head_sent[k]) / t.bits[k]);
  }
  return v.empty() ? 0.0 : median(v);
}

}  // namespace

bool compressed_in_train(const HopTrainTiming& t, int k) {
  const double d = hop_dispersion(t, k);
  if (d <= 0 || t.bits[k] <= 0) return false;
  const double span = sent_level(t) * t.bits[k];
  return span >= kCloserMinSpan && d < kHopCloserShare * span;
}

bool HopEstimate::compressed() const {
  return closer_than_sent_in_many(CloserCount{compressed_trains, replies});
}

TrainChokes train_chokes(const HopTrainTiming& t, const std::vector<bool>& use,
                         const HopsFilter& f) {
  const int H = static_cast<int>(t.bits.size());
  TrainChokes c;
  c.choke.assign(H, false);
  c.valid = true;
  // Without a hop-0 level the first used hop always counts as a step: the
  // train reached it slower than nothing.
  double level = sent_level(t);
  for (int k = 0; k < H; ++k) {
    if (!use[k]) continue;
    const double d = hop_dispersion(t, k);
    if (d <= 0 || t.bits[k] <= 0) {
      c.valid = false;
      continue;
    }
    const double lk = d / t.bits[k];
    if (lk >= (1 + f.min_step) * level) {
      c.choke[k] = true;
      c.last = k;
    }
    level = std::max(level, lk);
  }
  return c;
}

HopsEstimate estimate_hops(const std::vector<HopTrainTiming>& trains, const HopsFilter& f) {
  HopsEstimate e;
  if (trains.empty()) return e;
  const int H = static_cast<int>(trains.front().bits.size());
  e.hops.resize(H);
  std::vector<bool> use(H, false);
  for (int k = 0; k < H; ++k) {
    std::vector<double> disp, rate;
    HopEstimate& h = e.hops[k];
    for (const auto& t : trains) {
      const double d = hop_dispersion(t, k);
      if (d <= 0 || t.bits[k] <= 0) continue;
      disp.push_back(d);
      rate.push_back(t.bits[k] / d);
      h.compressed_trains += compressed_in_train(t, k) ? 1 : 0;
    }
    h.replies = static_cast<int>(disp.size());
    if (h.replies > 0) h.compressed_fraction = static_cast<double>(h.compressed_trains) / h.replies;
    if (!disp.empty()) {
      h.dispersion_s = median(disp);
      h.rate_bps = median(rate);
      const auto [lo, hi] = std::minmax_element(rate.begin(), rate.end());
      h.rate_low_bps = *lo;
      h.rate_high_bps = *hi;
    }
    h.used = h.replies > 0 &&
             h.replies >= f.min_reply_fraction * static_cast<double>(trains.size()) &&
             !h.compressed();
    use[k] = h.used;
  }

  int last_used = -1;
  for (int k = 0; k < H; ++k) {
    if (use[k]) last_used = k;
  }
  std::vector<int> chokes(H, 0), lasts(H, 0), passed(H, 0);
  int none = 0;
  for (const auto& t : trains) {
    const TrainChokes c = train_chokes(t, use, f);
    if (!c.valid) continue;
    ++e.trains_voting;
    for (int k = 0; k < H; ++k) chokes[k] += c.choke[k] ? 1 : 0;
    // The train's rate at the target against each earlier hop's (median)
    // rate: a train that reached the target that fast crossed every link
    // after the hop that fast. (Not against its own rate at the hop: a train
    // a loaded link slowed far below the hop's rate passes any later link.)
    // Nor much faster than it: a train's rate never rises along the path
    // unless load of it was dropped (a full queue: its bits then count
    // packets that never arrived; benchmark path 24, a TCP-loaded link,
    // read 32.6 at the target through a 17.1 Mbit/s narrow link).
    const double end = last_used >= 0 ? t.bits[last_used] / hop_dispersion(t, last_used) : 0;
    for (int k = 0; k < last_used; ++k) {
      const double r = e.hops[k].rate_bps;
      if (use[k] && (1 + kPassedTolerance) * end >= r && end <= (1 + kPassedTolerance) * r) {
        ++passed[k];
      }
    }
    if (c.last >= 0)
      ++lasts[c.last];
    else
      ++none;
  }
  if (e.trains_voting == 0) return e;
  const double n = e.trains_voting;
  for (int k = 0; k < H; ++k) {
    e.hops[k].choke_fraction = chokes[k] / n;
    e.hops[k].bottleneck_fraction = lasts[k] / n;
    e.hops[k].passed_fraction = passed[k] / n;
    e.hops[k].passed_trains = passed[k];
  }
  e.no_choke_fraction = none / n;
  if (e.trains_voting < f.min_trains) return e;
  // Most votes; on a tie the hop with the lower rate (the narrower one).
  int best = -1;
  for (int k = 0; k < H; ++k) {
    if (lasts[k] == 0) continue;
    if (best < 0 || lasts[k] > lasts[best] ||
        (lasts[k] == lasts[best] && e.hops[k].rate_bps < e.hops[best].rate_bps)) {
      best = k;
    }
  }
  if (best >= 0 && lasts[best] > none) {
    e.bottleneck = best;
    e.confidence = e.hops[best].bottleneck_fraction;
  }
  return e;
}

namespace {

constexpr double kAbove = 1.05, kSlack = 1.03, kChoke = 0.5;

// After hop k no used hop reads faster than it (kSlack) and one reads
// slower by more than the factor `drop`: the loaded link shows after it.
bool slowed_after(const std::vector<HopRate>& hops, int k, double drop) {
  const double r = hops[static_cast<std::size_t>(k)].rate_bps;
  bool later_faster = false, later_slower = false;
  for (std::size_t j = static_cast<std::size_t>(k) + 1; j < hops.size(); ++j) {
    if (!hops[j].used || !(hops[j].rate_bps > 0)) continue;
    later_faster = later_faster || hops[j].rate_bps > kSlack * r;
    later_slower = later_slower || drop * hops[j].rate_bps < r;
  }
  return !later_faster && later_slower;
}

// The hop reads over kAbove above the trains' T, and T lies above half its
// rate r: a later link faster than r, whatever it carries, leaves a train
// at least r/2 (a slower one would be the narrow link).
bool hop_above_trains(const HopRate& h, double trains_bps) {
  return h.rate_bps > kAbove * trains_bps && 2 * trains_bps > h.rate_bps;
}

// The last hop that `min_trains` of the hops phase's trains (and a share of
// `min_share`) went on from at its rate, with narrow_hop_passed's other
// conditions.
int last_hop_passed(const std::vector<HopRate>& hops, double trains_bps, double min_share,
                    int min_trains) {
  if (!(trains_bps > 0)) return -1;
  int found = -1;
  for (int k = 0; k < static_cast<int>(hops.size()); ++k) {
    const HopRate& h = hops[k];
    if (!h.used || !(h.passed_fraction > 0) || h.passed_fraction < min_share ||
        h.passed_trains < min_trains || h.choke_fraction < kChoke ||
        !hop_above_trains(h, trains_bps)) {
      continue;
    }
    if (slowed_after(hops, k, kPassedDrop)) found = k;
  }
  return found;
}

}  // namespace

int narrow_hop_above_trains(const std::vector<HopRate>& hops, double trains_bps, double high_bps,
                            double later_bps) {
  if (!(trains_bps > 0) || !(high_bps > trains_bps) || !(later_bps > 0)) return -1;
  int found = -1;
  for (int k = 0; k < static_cast<int>(hops.size()); ++k) {
    const HopRate& h = hops[k];
    if (!h.used || !hop_above_trains(h, trains_bps) || h.rate_bps > high_bps ||
        h.choke_fraction < kChoke) {
      continue;
    }
    // Cross traffic on the later link at its whole rate would leave this.
    if (trains_bps <= later_bps * h.rate_bps / (h.rate_bps + later_bps)) continue;
    if (slowed_after(hops, k, kAbove)) found = k;
  }
  return found;
}

int narrow_hop_passed(const std::vector<HopRate>& hops, double trains_bps) {
  return last_hop_passed(hops, trains_bps, kMinPassed, kMinPassedTrains);
}

int hop_one_train_passed(const std::vector<HopRate>& hops, double trains_bps) {
  if (narrow_hop_passed(hops, trains_bps) >= 0) return -1;
  return last_hop_passed(hops, trains_bps, 0, 1);
}

int hop_at_capacity(const std::vector<HopRate>& hops, int named, double capacity_bps) {
  const int H = static_cast<int>(hops.size());
  if (!(capacity_bps > 0) || named < 0 || named >= H || !(hops[named].rate_bps > 0)) return -1;
  const double r = hops[named].rate_bps;
  if (r <= kHopFar * capacity_bps && r * kHopFar >= capacity_bps) return -1;
  int best = -1;
  const double named_off = std::fabs(r / capacity_bps - 1);
  for (int k = 0; k < H; ++k) {
    const HopRate& h = hops[k];
    const double off = std::fabs(h.rate_bps / capacity_bps - 1);
    if (!h.used || !(h.choke_fraction > 0) || !(h.rate_bps > 0) || off > kHopNear ||
        !(off < named_off)) {
      continue;
    }
    if (best < 0 || h.choke_fraction >= hops[best].choke_fraction) best = k;
  }
  return best;
}

namespace {

// The hop with the lowest rate among the used ones that slowed most trains
// (choke_fraction >= kChoke) and that `contradicts` the capacity; -1 when none.
template <typename Pred>
int slowest_contradicting_hop(const std::vector<HopRate>& hops, double capacity_bps,
                              Pred contradicts) {
  if (!(capacity_bps > 0)) return -1;
  int best = -1;
  for (int k = 0; k < static_cast<int>(hops.size()); ++k) {
    const HopRate& h = hops[k];
    if (!h.used || h.choke_fraction < kChoke || !contradicts(h)) continue;
    if (best < 0 || h.rate_bps < hops[best].rate_bps) best = k;
  }
  return best;
}

}  // namespace

int hop_below_capacity(const std::vector<HopRate>& hops, double capacity_bps) {
  return slowest_contradicting_hop(hops, capacity_bps, [&](const HopRate& h) {
    return h.rate_low_bps > 0 && h.rate_high_bps <= (1 + kTightSpread) * h.rate_low_bps &&
           capacity_bps > kAboveHop * h.rate_high_bps;
  });
}

int hop_far_below_capacity(const std::vector<HopRate>& hops, double capacity_bps) {
  return slowest_contradicting_hop(hops, capacity_bps, [&](const HopRate& h) {
    return h.rate_bps > 0 && h.rate_high_bps > 0 &&
           capacity_bps > kCrossTrafficFloor * h.rate_high_bps;
  });
}

int hop_clearly_below(const std::vector<HopRate>& hops, double capacity_bps) {
  return slowest_contradicting_hop(hops, capacity_bps, [&](const HopRate& h) {
    return h.rate_low_bps > 0 && h.rate_high_bps <= (1 + kSlowerSpread) * h.rate_low_bps &&
           capacity_bps > kSlowerMargin * h.rate_high_bps;
  });
}

namespace {

// Hop `h` and the least-delayed spans agree on one rate: the spans within
// kLeastDelayedAtHop of the hop's rate, its trains within kHopSpreadMax of
// each other.
bool agrees_with_least_delayed(const HopRate& h, double min_delay_bps) {
  return h.rate_bps > 0 && h.rate_low_bps > 0 &&
         h.rate_high_bps <= kHopSpreadMax * h.rate_low_bps &&
         std::fabs(min_delay_bps / h.rate_bps - 1) <= kLeastDelayedAtHop;
}

}  // namespace

int hop_at_least_delayed(const std::vector<HopRate>& hops, double capacity_bps,
                         double min_delay_bps) {
  if (!(min_delay_bps > 0)) return -1;
  return slowest_contradicting_hop(hops, capacity_bps, [&](const HopRate& h) {
    return agrees_with_least_delayed(h, min_delay_bps) &&
           capacity_bps > kSqueezedLift * std::max(min_delay_bps, h.rate_high_bps);
  });
}

int hop_under_least_delayed(const std::vector<HopRate>& hops, double capacity_bps,
                            double min_delay_bps, double squeezed_gaps_bps) {
  if (!(min_delay_bps > 0)) return -1;
  return slowest_contradicting_hop(hops, capacity_bps, [&](const HopRate& h) {
    if (!agrees_with_least_delayed(h, min_delay_bps) ||
        !(kSqueezedLift * capacity_bps < std::min(min_delay_bps, h.rate_low_bps)) ||
        !(squeezed_gaps_bps > kSqueezedLift * h.rate_bps)) {
      return false;
    }
    // No later hop over kSqueezedLift slower: only the target's link slowed them.
    for (const HopRate* later = &h + 1; later != hops.data() + hops.size(); ++later) {
      if (later->used && later->rate_bps > 0 && kSqueezedLift * later->rate_bps < h.rate_bps) {
        return false;
      }
    }
    return true;
  });
}

namespace {

// The first hop that did not leave the trains over kLastFaster times the
// gaps' upper end, when every hop before it answered and it gave a rate;
// -1 otherwise (narrow_link_is_last, narrow_hop_unchanged_after).
int first_hop_at_gaps(const std::vector<HopRate>& hops, double gaps_high_bps) {
  if (!(gaps_high_bps > 0)) return -1;
  std::size_t k = 0;
  while (k < hops.size() && hops[k].used && hops[k].rate_bps > kLastFaster * gaps_high_bps) ++k;
  if (k >= hops.size() || !hops[k].used || !(hops[k].rate_bps > 0)) return -1;
  return static_cast<int>(k);
}

}  // namespace

bool narrow_link_is_last(const std::vector<HopRate>& hops, double gaps_high_bps) {
  const int k = first_hop_at_gaps(hops, gaps_high_bps);
  return k >= 0 && static_cast<std::size_t>(k) + 1 == hops.size();
}

int narrow_hop_unchanged_after(const std::vector<HopRate>& hops, double gaps_high_bps) {
  const int k = first_hop_at_gaps(hops, gaps_high_bps);
  if (k < 0 || static_cast<std::size_t>(k) + 1 >= hops.size()) return -1;
  const double r = hops[static_cast<std::size_t>(k)].rate_bps;
  for (std::size_t j = static_cast<std::size_t>(k) + 1; j < hops.size(); ++j) {
    if (!hops[j].used || std::fabs(hops[j].rate_bps / r - 1) > kUnchangedAfter ||
        hops[j].compressed_fraction > 0) {
      return -1;
    }
  }
  return k;
}

}  // namespace lw
