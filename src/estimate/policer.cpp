#include "estimate/policer.hpp"

#include <algorithm>
#include <cmath>

#include "estimate/stats.hpp"

namespace lw {

namespace {

// A point's size on the wire, in bits: its own where known, else the stream's
// packet size.
double size_bits(const PolicerPoint& p, double packet_bits) {
  return p.bits > 0 ? p.bits : packet_bits;
}

// The bucket from the load's positions, R's interval known: at least the
// bytes through the last position answered before the first lost, at most
// those through that lost marker, each less the tokens R brought in since the
// stream's first packet (the lower bound with R's high end, the upper with its
// low end). Once the bucket has emptied, a position of n markers passes only
// with n packets of tokens at its first: `most` bounds what it could hold,
// had the bucket emptied at any time before (under a packet then; R's high
// end times each gap in; a packet's size out whenever it held it, never
// under a full-size packet's, which an emptied bucket drops). A position that
// needed no more is no proof and is passed over: a single marker never is.
void find_bucket(const std::vector<const PolicerPoint*>& stream, double packet_bits,
                 PolicerFinding& f) {
  if (stream.empty()) return;
  const Nanos t0 = stream.front()->sent;
  auto tokens_by = [&](const PolicerPoint& p, double rate_bps) {
    return rate_bps * std::max(0.0, to_seconds(p.sent - t0));
  };
  const double L = packet_bits;
  double most = L;  // the bound, right after the stream's previous packet
  for (std::size_t i = 0; i < stream.size();) {
    // The position: markers i..j-1 (with what was sent between them: the
    // small closers of open-port markers).
    std::size_t j = i + 1;
    if (stream[i]->marker && stream[i]->position >= 0) {
      for (std::size_t k = i + 1; k < stream.size(); ++k) {
        if (stream[k]->marker && stream[k]->position != stream[i]->position) break;
        if (stream[k]->marker) j = k + 1;
      }
    }
    // Could its markers all have passed on tokens after the bucket emptied?
    // (A load packet: nothing to tell; the bound moves on.)
    bool could = true;
    double held = most;  // the bound as each passes in turn
    for (std::size_t k = i; k < j; ++k) {
      const double in = k == 0 ? 0.0
                               : f.rate_high_bps *
                                     std::max(0.0, to_seconds(stream[k]->sent - stream[k - 1]->sent));
      const double size = size_bits(*stream[k], L);
      held += in;
      most += in;
      if (stream[k]->marker) {
        could = could && held >= size;
        held -= size;
      }
      most = std::max(L, most - size);
      if (stream[k]->marker && stream[k]->reply == 0) {
        f.burst_high_bytes =
            std::max(L, stream[k]->bits_before + L - tokens_by(*stream[k], f.rate_low_bps)) / 8;
        return;
      }
    }
    if (stream[i]->marker && !could) {
      const PolicerPoint& last = *stream[j - 1];
      f.burst_low_bytes = std::max(
          f.burst_low_bytes, (last.bits_before + L - tokens_by(last, f.rate_high_bps)) / 8);
    }
    i = j;
  }
}

}  // namespace

PolicerFinding detect_policer(const std::vector<PolicerPoint>& points, double packet_bits,
                              const PolicerOptions& opt) {
  PolicerFinding f;
  std::vector<const PolicerPoint*> chirp, among, load;
  for (const PolicerPoint& p : points) {
    (p.chirp ? (p.marker ? chirp : among) : load).push_back(&p);
  }
  // The tokens our other packets took while the chirp ran, in (from, to]:
  // its small packets (open-port markers' closers: a policer passes them on a
  // few bytes of tokens, nearly always) and what our own kernel sent back for
  // each reply then (opt.echo_bits).
  auto others_bits = [&](Nanos from, Nanos to) {
    double bits = 0;
    for (const PolicerPoint* p : among) {
      if (p->sent > from && p->sent <= to) bits += size_bits(*p, packet_bits);
    }
    if (opt.echo_bits > 0) {
      for (const PolicerPoint& p : points) {
        if (p.reply > from && p.reply <= to) bits += opt.echo_bits;
      }
    }
    return bits;
  };
  f.chirp_markers = static_cast<int>(chirp.size());
  for (const PolicerPoint* p : chirp) f.chirp_answered += p->reply > 0 ? 1 : 0;
  if (chirp.size() < 8 || !(packet_bits > 0)) {
    f.reason = "too few chirp markers";
    return f;
  }
  for (std::size_t k = 1; k < chirp.size(); ++k) {
    if (chirp[k]->sent <= chirp[k - 1]->sent) {
      f.reason = "chirp markers not in send order";
      return f;
    }
  }
  // Each marker's rate: its bits and our others' over the gap before it (the
  // first: the second's).
  std::vector<double> rate(chirp.size());
  for (std::size_t k = 1; k < chirp.size(); ++k) {
    rate[k] = (packet_bits + others_bits(chirp[k - 1]->sent, chirp[k]->sent)) /
              to_seconds(chirp[k]->sent - chirp[k - 1]->sent);
  }
  rate[0] = rate[1];
  int fast = 0, fast_lost = 0;
  for (std::size_t k = 0; k < chirp.size(); ++k) {
    if (rate[k] < 0.5 * rate[0]) break;
    ++fast;
    fast_lost += chirp[k]->reply > 0 ? 0 : 1;
  }
  if (fast == 0 || fast_lost < opt.min_fast_loss * fast) {
    f.reason = "the fast chirp markers passed";
    return f;
  }
  // Nothing queued: the answered markers' delays stay near the least.
  std::vector<double> delays;
  for (const PolicerPoint& p : points) {
    if (p.reply > 0 && p.reply > p.sent) delays.push_back(to_seconds(p.reply - p.sent));
  }
  if (delays.empty()) {
    f.reason = "no marker answered";
    return f;
  }
  const double least = *std::min_element(delays.begin(), delays.end());
  if (median(delays) - least > to_seconds(opt.max_queue_delay)) {
    f.reason = "the answered markers queued";
    return f;
  }
  std::size_t last_lost = 0;
  for (std::size_t k = 0; k < chirp.size(); ++k) {
    if (chirp[k]->reply == 0) last_lost = k;
  }
  if (last_lost + 1 == chirp.size()) {
    // Lost to the end: R below the slowest rate the chirp reached.
    f.found = true;
    f.rate_is_upper_bound = true;
    f.rate_bps = f.rate_high_bps = rate.back();
    f.rate_low_bps = 0;
    find_bucket(load, packet_bits, f);
    return f;
  }
  if (static_cast<int>(chirp.size() - last_lost - 1) < opt.min_tail_answered) {
    f.reason = "too few answered markers after the last loss";
    return f;
  }
  // The count: markers answered after the first up to the last loss carried
  // R over that time. The bucket held under one packet of tokens at the
  // chirp's first marker (the load before it, or that marker, found it
  // short) and under one at the last loss (it was dropped): with `passed`
  // answered, (passed - 1)·L < R·span < (passed + 1)·L. (The low end was
  // passed·L, as if the bucket had been empty at the start: the lab's 20
  // Mbit/s policer read [20.08, 22.09] in 1 run of 4, tests/lab/test_shaper.py.)
  // Our other packets over that time took their tokens too (the lab's 10
  // Mbit/s policer read 7.6-7.8 with open-port markers before they counted:
  // closers and our kernel's RSTs, 100 bytes a marker).
  int passed = 0;
  for (std::size_t k = 1; k < last_lost; ++k) passed += chirp[k]->reply > 0 ? 1 : 0;
  const double passed_bits =
      passed * packet_bits + others_bits(chirp[0]->sent, chirp[last_lost]->sent);
  const double span = to_seconds(chirp[last_lost]->sent - chirp[0]->sent);
  f.found = true;
  f.rate_high_bps = rate[last_lost];
  if (span > 0) {
    f.rate_low_bps =
        std::min(std::max(0.0, passed_bits - packet_bits) / span, f.rate_high_bps);
    f.rate_high_bps = std::min(f.rate_high_bps, (passed_bits + packet_bits) / span);
  }
  // Fewer than three in the count: the last loss's rate and the first
  // answered one's bound it better.
  if (passed < 3) {
    f.rate_low_bps = std::max(f.rate_low_bps, rate[last_lost + 1] * 0.9);
    f.rate_high_bps = std::max(f.rate_high_bps, f.rate_low_bps);
  }
  // The estimate: the middle of [passed·L/span, the high end]. The bucket
  // was usually near empty at the chirp's start and near a packet at the
  // last loss (lab, 20 Mbit/s: the count alone read 17.1-19.9, this
  // 19.5-21.0); the interval keeps the packet either way.
  const double count_bps = span > 0 ? std::min(passed_bits / span, f.rate_high_bps) : 0;
  f.rate_bps = std::sqrt(std::max({count_bps, f.rate_low_bps, 1.0}) * f.rate_high_bps);
  find_bucket(load, packet_bits, f);
  return f;
}

}  // namespace lw
