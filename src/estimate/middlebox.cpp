#include "estimate/middlebox.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "estimate/stats.hpp"

namespace lw {

int initial_ttl_guess(int ttl) {
  if (ttl <= 0) return 0;
  for (int init : {32, 64, 128}) {
    if (ttl <= init) return init;
  }
  return 255;
}

int reply_hops(int ttl) { return ttl <= 0 ? 0 : initial_ttl_guess(ttl) - ttl + 1; }

const char* replier_verdict_name(ReplierVerdict v) {
  switch (v) {
    case ReplierVerdict::kNotChecked:
      return "not_checked";
    case ReplierVerdict::kConsistent:
      return "consistent";
    case ReplierVerdict::kMiddlebox:
      return "middlebox";
    case ReplierVerdict::kForwardLonger:
      return "forward_longer";
    case ReplierVerdict::kInconclusive:
      return "inconclusive";
  }
  return "?";
}

ReplierCheck classify_replier(int reply_ttl, const TtlAnswer& at_hops, const TtlAnswer& beyond) {
  ReplierCheck r;
  r.reply_ttl = reply_ttl;
  r.reply_hops = reply_hops(reply_ttl);
  if (r.reply_hops == 0) return r;
  if (at_hops.kind == TtlAnswer::kTargetReply) {
    // A SYN with just the TTL the replies' hop count asks for reached the replier.
    r.verdict = ReplierVerdict::kConsistent;
    return r;
  }
  r.verdict = ReplierVerdict::kInconclusive;
  if (at_hops.kind != TtlAnswer::kTimeExceeded) return r;  // silence proves nothing
  r.box_hops = reply_hops(at_hops.ttl);
  if (beyond.kind != TtlAnswer::kTargetReply) {
    // The forward path is at least two hops longer than the replies say: a
    // router answering in the target's name would have answered TTL + 1.
    r.verdict = ReplierVerdict::kForwardLonger;
    return r;
  }
  if (r.box_hops == r.reply_hops) {
    // The router where the SYN expired is exactly as far back as the
    // "target", and one more hop of TTL gets the target's answer: what a
    // router answering in the target's name looks like.
    r.verdict = ReplierVerdict::kMiddlebox;
    r.box = at_hops.from;
  } else if (r.box_hops < r.reply_hops) {
    // That router is nearer on the way back than the replier: the usual
    // picture of a forward path one hop longer than the return path.
    r.verdict = ReplierVerdict::kForwardLonger;
  }
  return r;
}

MixedReplies mixed_repliers(const std::vector<ReplyStamp>& replies) {
  MixedReplies m;
  std::map<std::pair<int, bool>, int> groups;
  for (const auto& r : replies) {
    if (r.ttl <= 0) continue;
    ++groups[{reply_hops(r.ttl), r.ip_id == 0}];
    ++m.total;
  }
  if (m.total == 0) return m;
  const int enough = std::max(2, static_cast<int>(std::ceil(0.05 * m.total)));
  std::vector<std::pair<int, int>> big;  // (count, hops)
  int largest = 0;
  for (const auto& [key, n] : groups) {
    largest = std::max(largest, n);
    if (n >= enough) big.emplace_back(n, key.first);
  }
  std::sort(big.rbegin(), big.rend());
  m.groups = static_cast<int>(big.size());
  m.mixed = m.groups >= 2;
  m.minority = m.total - largest;
  for (const auto& [n, h] : big) {
    if (std::find(m.hops.begin(), m.hops.end(), h) == m.hops.end()) m.hops.push_back(h);
  }
  return m;
}

double send_limit_bps(double measured_send_bps, double max_rate_bps, double interface_bps) {
  double limit = 0;
  for (double x : {measured_send_bps, max_rate_bps, interface_bps}) {
    if (x > 0) limit = limit > 0 ? std::min(limit, x) : x;
  }
  return limit;
}

bool capacity_at_send_rate(double capacity_bps, double limit_bps, double margin) {
  return limit_bps > 0 && capacity_bps > 0 && capacity_bps >= margin * limit_bps;
}

LoadCheck judge_load(double rst_capacity_bps, const std::vector<double>& syn_kept_bps,
                     int syn_uncompressed, int min_used, double threshold) {
  LoadCheck c;
  c.checked = true;
  c.used = static_cast<int>(syn_kept_bps.size());
  c.uncompressed = syn_uncompressed;
  if (c.used == 0) return c;
  c.syn_capacity_bps = median(syn_kept_bps);
  if (rst_capacity_bps > 0) c.ratio = c.syn_capacity_bps / rst_capacity_bps;
  // Most SYN trains must agree that the path is slow; a few compressed by
  // cross traffic among uncompressed ones do not make a drop.
  c.dropped = c.used >= min_used && c.used > c.uncompressed && c.ratio > 0 && c.ratio < threshold;
  return c;
}

bool fast_among_slow(const std::vector<double>& train_bps, double estimate_bps,
                     double send_limit_bps) {
  if (!(send_limit_bps > 0) || !(estimate_bps > 0) || estimate_bps >= 0.1 * send_limit_bps) {
    return false;
  }
  const auto n = static_cast<double>(train_bps.size());
  const auto fast = static_cast<double>(fast_trains(train_bps, send_limit_bps));
  return n >= 5 && fast >= std::max(2.0, 0.25 * n);
}

int fast_trains(const std::vector<double>& train_bps, double send_limit_bps) {
  if (!(send_limit_bps > 0)) return 0;
  return static_cast<int>(std::count_if(train_bps.begin(), train_bps.end(),
                                        [&](double r) { return r >= 0.5 * send_limit_bps; }));
}

RateConfirm confirm_rate(double rate_bps, const std::vector<double>& syn_kept_bps,
                         int syn_uncompressed, int sent, int min_whole, double share) {
  RateConfirm r;
  r.sent = sent;
  r.whole = static_cast<int>(syn_kept_bps.size()) + std::max(0, syn_uncompressed);
  if (!syn_kept_bps.empty()) r.syn_bps = median(syn_kept_bps);
  if (r.whole < min_whole) return r;
  // (An uncompressed train: far above any rate judged here, finite so that
  // the median's interpolation stays a number.)
  std::vector<double> all = syn_kept_bps;
  all.insert(all.end(), static_cast<std::size_t>(std::max(0, syn_uncompressed)),
             1e3 * std::max(rate_bps, 1.0));
  r.confirmed = median(all) >= share * rate_bps;
  return r;
}

}  // namespace lw
