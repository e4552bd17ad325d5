#include "app/shaper_run.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "app/run_notes.hpp"
#include "app/session.hpp"
#include "estimate/shaper.hpp"
#include "match/match.hpp"
#include "plan/shaper_plan.hpp"
#include "report/writers.hpp"

namespace lw {

namespace {

constexpr int kMaxStreams = 4;
constexpr double kMinStreamBytes = 256e3;
constexpr double kMaxStreamBytes = 32e6;
// Seconds of the sustained phase a stream aims at beyond the bucket.
constexpr double kSustainedS = 0.15;

std::vector<ShaperPoint> points_of(const Train& t, const TrainOutcome& o) {
  std::vector<ShaperPoint> pts;
  for (std::size_t k = 0; k < t.markers.size(); ++k) {
    const auto& p = o.probes[static_cast<std::size_t>(t.markers[k])];
    pts.push_back({t.bits_from_head[k], p.reply});
  }
  return pts;
}

std::string kb(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f KB", bytes / 1e3);
  return b;
}

// A stream's finding into the record (the last one found wins).
void keep_finding(const ShaperFinding& f, ShaperRecord& rec) {
  rec.found = true;
  rec.verdict = "found";
  rec.rate_bps = f.rate_bps;
  rec.rate_low_bps = f.rate_low_bps;
  rec.rate_high_bps = f.rate_high_bps;
  rec.peak_bps = f.peak_bps;
  rec.peak_is_lower_bound = f.peak_at_offered;
  rec.bucket_bytes = f.bucket_bytes;
}

}  // namespace

ShaperRecord run_shaper_probe(Session& s, const Config& c, const std::atomic<bool>& stop,
                              Nanos t_cap, const ShaperHints& h) {
  ShaperRecord rec;
  rec.trigger = h.trigger;
  const int L = s.packet_size;
  // The stream is sent back to back, or at --max-rate.
  const Nanos gap = min_gap_for_rate(c.max_rate_bps, L + 40);
  const double send_bps = std::min(c.max_rate_bps, h.fast_bps > 0 ? h.fast_bps : c.max_rate_bps);
  // The slow rate bounds how long replies take and how long a bucket takes to
  // refill; unknown, 1 Mbit/s (the slowest sustained rate we look for).
  const double slow = h.slow_bps > 0 ? h.slow_bps : 1e6;
  double bytes = std::max(kMinStreamBytes, 2 * h.fast_bytes) + slow * kSustainedS / 8;
  double refill_s = 8.0 * (h.fast_bytes + h.queued_bytes) / slow;
  int shift_at = 0;
  bool confirming = false;
  double last_bucket = 0;
  for (int k = 0; k < kMaxStreams && !stop.load(); ++k) {
    const double room = static_cast<double>(c.max_bytes) -
                        static_cast<double>(s.prober->bytes_sent()) - 64e3;
    bytes = std::min({bytes, kMaxStreamBytes, room});
    if (bytes < 64e3) break;
    ShaperStreamParams p;
    p.flow = s.flow;
    p.packet_size = static_cast<std::uint16_t>(L);
    p.load_packets = shaper_load_packets(bytes, L);
    p.gap = gap;
    p.shift_at = shift_at;
    const Train t = make_shaper_train(p, -600 - k, s.seqs);
    // Idle: the queue drains and the bucket refills.
    const Nanos now = mono_now();
    const Nanos idle = std::min<Nanos>(from_seconds(std::min(refill_s, 5.0)),
                                       std::max<Nanos>(0, (t_cap - now) / 3));
    // Replies come back at the sustained rate, which may be far below what
    // the trains showed: wait long, but stop when they stop coming.
    const Nanos wait_replies = std::min<Nanos>(8 * kSec, std::max<Nanos>(0, (t_cap - now - idle) / 2));
    const Nanos quiet = std::max<Nanos>(300 * kMs, from_seconds(20 * s.disc.rtt_s));
    const Nanos send_time = from_seconds(8.0 * static_cast<double>(t.total_bytes()) / send_bps);
    if (wait_replies < 4 * quiet || now + idle + send_time + wait_replies > t_cap) {
      if (c.verbose) std::fprintf(stderr, "shaper stream %d: no time left\n", k);
      break;
    }
    const Nanos start = now + idle;
    const double idle_s = to_seconds(idle);
    while (mono_now() < start && !stop.load()) sleep_until(start);
    if (stop.load()) break;
    // Within the reply budget; no reply check: the stream is meant to lose
    // its tail when the shaper's queue overflows.
    if (!wait_for_reply_budget(s, s.dst, static_cast<int>(t.markers.size()), t_cap - wait_replies))
      break;
    s.prober->note(note_json(ShaperStreamNote{t.id, t.total_bytes()}));
    const TrainRun run = s.prober->run(t, t.markers, wait_replies, false, 2 * kMs, 0, quiet);
    ++rec.streams;
    rec.probed = true;
    rec.stream_bytes += t.total_bytes();
    // What we actually offered: the stream's bits over its send span (a busy
    // host sends slower than planned).
    double offered = send_bps;
    {
      const std::size_t head = static_cast<std::size_t>(t.markers.front());
      const std::size_t tail = static_cast<std::size_t>(t.markers.back());
      if (run.sent.size() > tail && run.sent[head].sent && run.sent[tail].sent &&
          run.sent[tail].actual > run.sent[head].actual) {
        offered = t.bits_from_head.back() / to_seconds(run.sent[tail].actual - run.sent[head].actual);
      }
    }
    const ShaperFinding f = detect_shaper(points_of(t, run.outcome), offered);
    if (c.verbose) {
      std::fprintf(stderr,
                   "shaper stream %d: %llu bytes, %d replies: %s rate %.4g peak %.4g bucket %.0f "
                   "stream %.4g overflow %.0f%s\n",
                   k, static_cast<unsigned long long>(t.total_bytes()), f.points,
                   f.found ? "found" : f.reason.c_str(), f.rate_bps, f.peak_bps, f.bucket_bytes,
                   f.stream_rate_bps, f.overflow_bits / 8, f.uncompressed ? " (uncompressed)" : "");
    }
    rec.stream_rate_bps = f.uncompressed ? 0 : f.stream_rate_bps;
    // The idle before this stream was too short for the measured rate to
    // refill a bucket that could hold what the trains saw pass fast, or this
    // stream found a clearly larger bucket than the last: the bucket was not
    // full. Again, after an idle that refills 2.5 times the estimate.
    const bool short_idle =
        idle_s < 8.0 * std::max(h.fast_bytes, 1.2 * f.bucket_bytes) / f.rate_bps;
    const bool grew = last_bucket > 0 && f.bucket_bytes > 1.15 * last_bucket;
    if (f.found && k + 1 < kMaxStreams && ((!confirming && short_idle) || grew)) {
      confirming = true;
      last_bucket = f.bucket_bytes;
      const double b = std::max(h.fast_bytes, 2.5 * f.bucket_bytes);
      // The markers go after the shift this stream saw; the stream runs on
      // far enough past it for a bucket up to 1.3 times larger.
      const double shift_bytes =
          f.bucket_bytes * f.peak_bps / std::max(1.0, f.peak_bps - f.rate_bps);
      const double sustained = f.rate_bps * 2 * kSustainedS / 8;
      refill_s = 8.0 * (b + (f.overflow_bits > 0 ? f.overflow_bits / 8 - f.bucket_bytes : 0)) /
                 f.rate_bps;
      shift_at = static_cast<int>(shift_bytes / L);
      bytes = 1.3 * shift_bytes + sustained;
      // Keep what this stream found, should time run out for the next.
      keep_finding(f, rec);
      if (c.verbose) std::fprintf(stderr, "shaper: confirming after %.2f s\n", refill_s);
      continue;
    }
    if (f.found) {
      keep_finding(f, rec);
      rec.not_emptied = false;
      break;
    }
    if (rec.found && f.stream_rate_bps > 2 * rec.rate_bps && k + 1 < kMaxStreams) {
      // A confirming stream that passed whole at the burst's speed: the full
      // bucket is larger than it. Once more, longer, after a longer idle.
      const double b = static_cast<double>(t.total_bytes());
      last_bucket = b;
      refill_s = 8.0 * 2.5 * b / rec.rate_bps;
      shift_at = 0;
      bytes = 2 * b + rec.rate_bps * 2 * kSustainedS / 8;
      continue;
    }
    if (rec.found) break;  // a confirming stream failed: keep the earlier finding
    if (f.points < 5) {
      rec.verdict = "no_replies";
      break;
    }
    if (f.uncompressed) {
      // The whole stream passed at the rate we sent it: a bucket larger
      // than the stream, or no shaper and a path at least that fast.
      rec.not_emptied = true;
      rec.verdict = "not_emptied";
      rec.bucket_at_least_bytes = static_cast<double>(t.total_bytes());
      rec.peak_bps = f.stream_rate_bps;
      rec.peak_is_lower_bound = true;
      refill_s = 8.0 * bytes / slow;
      bytes *= 4;
      continue;
    }
    rec.verdict = "none";
    rec.not_emptied = false;
    if (f.reason == "sustained phase too short" && f.rate_bps > 0 && f.peak_bps > f.rate_bps) {
      // A shift near the end (or before the shaper's queue overflowed): a
      // stream that ends a little after the shift, its markers after it.
      const double shift_bytes = f.bucket_bytes * f.peak_bps / (f.peak_bps - f.rate_bps);
      double sustained = f.rate_bps * 2 * kSustainedS / 8;
      if (f.overflow_bits > 0) {
        sustained = std::min(sustained, 0.7 * (f.overflow_bits / 8 - shift_bytes));
      }
      sustained = std::max(sustained, 8.0 * L);
      refill_s = 8.0 * (1.2 * f.bucket_bytes +
                        (f.overflow_bits > 0 ? f.overflow_bits / 8 - shift_bytes : 0)) /
                 f.rate_bps;
      shift_at = static_cast<int>(shift_bytes / L);
      bytes = shift_bytes + sustained;
      continue;
    }
    break;
  }
  return rec;
}

void apply_shaper(const ShaperRecord& rec, CapacityResult& res) {
  res.shaper = rec;
  if (rec.found) {
    res.valid = true;
    res.lower_bound = false;
    res.capacity_bps = rec.rate_bps;
    res.low_bps = rec.rate_low_bps;
    res.high_bps = std::isfinite(rec.rate_high_bps) ? rec.rate_high_bps : rec.rate_bps;
    res.kde_bandwidth_bps = 0;
    res.capacity_source = "shaper_stream";
    // The trains' own verdicts described the burst, not the path.
    res.warnings.erase(std::remove_if(res.warnings.begin(), res.warnings.end(),
                                      [](const Warning& w) {
                                        return w.code == "no_estimate" ||
                                               w.code == "capacity_lower_bound" ||
                                               w.code == "slope_too_noisy" ||
                                               w.code == "load_loss_suspected" ||
                                               w.code == "single_length_estimate" ||
                                               w.code == "max_rate_limited" ||
                                               w.code == "trains_shortened";
                                      }),
                       res.warnings.end());
    res.warnings.push_back(
        {WarningCode::kTokenBucket,
         "a token-bucket shaper: " + format_rate(rec.rate_bps) + " sustained after a burst of " +
             kb(rec.bucket_bytes) + " at " + (rec.peak_is_lower_bound ? "at least " : "") +
             format_rate(rec.peak_bps) +
             "; capacity_bps is the sustained rate, peak_capacity_bps the burst's"});
  } else if (rec.not_emptied) {
    res.warnings.push_back(
        {WarningCode::kShaperNotEmptied,
         "the capacity trains disagreed the way a token bucket makes them, but a stream of " +
             kb(rec.bucket_at_least_bytes) +
             " came back at the rate it was sent: a bucket of at least that much, larger than "
             "--max-bytes / --max-time allowed to empty; the capacity may be the burst's"});
  }
}

}  // namespace lw
