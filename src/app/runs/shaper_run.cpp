#include "app/runs/shaper_run.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <random>

#include "app/plumbing/config.hpp"
#include "app/plumbing/run_notes.hpp"
#include "app/plumbing/session.hpp"
#include "app/runs/capacity_run.hpp"
#include "estimate/stats.hpp"
#include "estimate/policer.hpp"
#include "estimate/shaper.hpp"
#include "match/match.hpp"
#include "plan/policer_plan.hpp"
#include "plan/shaper_plan.hpp"
#include "report/writers.hpp"

namespace lw {

namespace {

constexpr int kMaxStreams = 4;
constexpr double kMinStreamBytes = 256e3;
constexpr double kMaxStreamBytes = 32e6;
// Seconds of the sustained phase a stream aims at beyond the bucket.
constexpr double kSustainedS = 0.15;
// Seconds at the trains' rate of the routine check's stream, and its bounds
// (it counts in the --max-load ledger: each second of it costs ten of the
// run's at the default 10%).
constexpr double kRoutineS = 0.1;
constexpr double kRoutineMinBytes = 64e3;
constexpr double kRoutineMaxBytes = 1e6;
// Seconds of the reply budget its markers may take.
constexpr double kRoutineReplyS = 0.25;

std::vector<ShaperPoint> points_of(const Train& t, const TrainOutcome& o) {
  std::vector<ShaperPoint> pts;
  for (std::size_t k = 0; k < t.markers.size(); ++k) {
    const auto& p = o.probes[static_cast<std::size_t>(t.markers[k])];
    pts.push_back({t.bits_from_head[k], p.reply, p.sent});
  }
  return pts;
}

// The path's RTT: the discovery's, or less when a stream's head marker saw
// less (an RTT taken behind a standing queue: 128 ms behind a 10 Mbit/s
// bucket that another run had just emptied, against 0.1 ms through it full).
double path_rtt(const Session& s, const ShaperRecord& rec) {
  return rec.head_rtt_s > 0 ? std::min(s.disc.rtt_s, rec.head_rtt_s) : s.disc.rtt_s;
}

// A probe's capacity in place of the trains': valid, not a bound, no KDE
// bandwidth; the trains' warnings in `dropped` no longer describe the path.
void take_capacity(CapacityResult& res, double rate, double low, double high, const char* source,
                   std::initializer_list<const char*> dropped) {
  res.valid = true;
  res.lower_bound = false;
  res.capacity_bps = rate;
  res.low_bps = low;
  res.high_bps = high;
  res.kde_bandwidth_bps = 0;
  res.capacity_source = source;
  res.warnings.erase(std::remove_if(res.warnings.begin(), res.warnings.end(),
                                    [&](const Warning& w) {
                                      return std::any_of(dropped.begin(), dropped.end(),
                                                         [&](const char* d) { return w.code == d; });
                                    }),
                     res.warnings.end());
}

// A finding the confirming stream contradicted.
void forget_finding(ShaperRecord& rec) {
  rec.found = false;
  rec.verdict = "none";
  rec.rate_bps = rec.rate_low_bps = rec.rate_high_bps = 0;
  rec.peak_bps = 0;
  rec.peak_is_lower_bound = false;
  rec.bucket_bytes = 0;
}

// How long a stream's replies may pause before the wait ends: 20 RTTs,
// 0.3-1.5 s. Uncapped, an RTT of 100 ms or more (a long path, or a standing
// queue when the RTT was taken: 129 ms behind a 10 Mbit/s shaper's queue)
// asked for more than the 8 s reply wait, and no stream was ever sent ("no
// time left").
Nanos stream_quiet(double rtt_s) {
  return std::clamp<Nanos>(from_seconds(20 * rtt_s), 300 * kMs, 1500 * kMs);
}

std::string kb(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f KB", bytes / 1e3);
  return b;
}

// A stream's finding into the record (the last one found wins), but for the
// peak: the fastest of the streams that found the bucket. Nothing makes a
// burst's replies come back faster than the peak (detect_shaper refuses a
// burst faster than we sent it), while a stall or the first sustained point
// slows them: the lab's 50 Mbit/s peak read 45-47 on most streams and 32.6
// on one confirming stream, which alone made the record.
//
// The bucket too is the largest found: a stream sees at most what the bucket
// holds, less when it had not refilled (a confirming stream after an idle
// that the time left cut short read 2.2 MB of a 3 MB bucket the stream before
// it had read whole).
void keep_finding(const ShaperFinding& f, ShaperRecord& rec) {
  const bool faster_peak = !rec.found || f.peak_bps >= rec.peak_bps;
  const double bucket = rec.found ? std::max(rec.bucket_bytes, f.bucket_bytes) : f.bucket_bytes;
  rec.found = true;
  rec.verdict = "found";
  rec.rate_bps = f.rate_bps;
  rec.rate_low_bps = f.rate_low_bps;
  rec.rate_high_bps = f.rate_high_bps;
  if (faster_peak) {
    rec.peak_bps = f.peak_bps;
    rec.peak_is_lower_bound = f.peak_at_offered;
  }
  rec.bucket_bytes = bucket;
}

}  // namespace

// A stream that came back as one line about as fast as the trains that
// fit the bucket said nothing the trains had not: it stayed inside any
// bucket there is, as one that came back at our own rate. Not only
// "uncompressed" (0.9 of what we sent): on the lab's gigabit veth path
// our sending outran the forwarding, a 2.3 MB stream into a 3 MB bucket
// at 20 Mbit/s came back at 976 Mbit/s, under 0.9 of it, the probe said
// "none" and the avail-bw search read the burst (+3401%, 2 runs of 4 in
// the token-bucket benchmark at 917d250).
//
// About as fast: not well above them either. No bucket lets a stream
// through faster than the trains that fit it; a stream's markers are bare
// SYNs, which a byte-limited queue full of our load still takes, so a
// stream whose load a small queue dropped reads its bits over the
// markers' times as a rate the path never carried (benchmark path 12: 6
// Mbit/s behind a 25 KB queue, trains at 4-6, a stream sent at 865
// Mbit/s "came back" at 9.1 as one line and was reported as a bucket
// larger than 444 KB). (A stream near our own sending rate, over half of
// it, is no such artefact: a sizing train slowed by a busy host is a low
// reference.)
bool stream_passed_whole(const ShaperFinding& f, const ShaperHints& h) {
  if (f.uncompressed) return true;
  const bool line = !f.found && f.reason == "no level shift" && f.stream_rate_bps > 0;
  const bool near_our_rate = f.offered_bps > 0 && f.stream_rate_bps >= 0.5 * f.offered_bps;
  return line && h.fast_bps > 0 && f.stream_rate_bps >= 0.8 * h.fast_bps &&
         (h.trigger == "capacity_lower_bound" || near_our_rate ||
          f.stream_rate_bps <= 1.25 * h.fast_bps);
}

double routine_stream_bytes(double capacity_bps) {
  return std::min(kRoutineMaxBytes, std::max(kRoutineMinBytes, kRoutineS * capacity_bps / 8));
}

int routine_markers(double replies_per_s, int max_burst) {
  constexpr int kMost = 24, kLeast = 12;
  const int n = std::min(kMost, static_cast<int>(std::floor(kRoutineReplyS * replies_per_s)));
  return n >= kLeast && max_burst >= n ? n : 0;
}

ShaperRecord run_shaper_probe(Session& s, const Config& c, const std::atomic<bool>& stop,
                              Nanos t_cap, const ShaperHints& h) {
  ShaperRecord rec;
  rec.trigger = h.trigger;
  const int L = s.packet_size;
  // The stream is sent back to back, or at --max-rate; the routine check's
  // first one paced (ShaperHints::pace_bps), every one after it back to back:
  // a paced stream shares the shaper with the other flows in proportion,
  // S/(S + X) of R, where one sent back to back keeps nearly all of it
  // (the token-bucket benchmark: 10 Mbit/s, 30 KB, 50 Mbit/s peak, 25% CBR
  // through it, read -7.7% from the paced stream alone).
  const bool paced = h.pace_bps > 0 && h.pace_bps < c.max_rate_bps;
  const Nanos back_to_back = min_gap_for_rate(c.max_rate_bps, L + 40);
  const Nanos paced_gap = paced ? min_gap_for_rate(h.pace_bps, L) : back_to_back;
  Nanos gap = paced_gap;
  bool first_paced = false;  // the finding being confirmed came from the paced stream
  const double send_bps = std::min(c.max_rate_bps, h.fast_bps > 0 ? h.fast_bps : c.max_rate_bps);
  // The slow rate bounds how long replies take and how long a bucket takes to
  // refill; unknown, 1 Mbit/s (the slowest sustained rate we look for).
  const double slow = h.slow_bps > 0 ? h.slow_bps : 1e6;
  // The bucket the trains suggest (not every byte they put through it: it
  // refilled between them).
  const double fast =
      bucket_hint_bytes(h.fast_bytes, h.largest_fast_bytes, h.fast_span_s, h.slow_bps);
  double bytes = h.stream_bytes > 0 ? h.stream_bytes
                                    : std::max(kMinStreamBytes, 2 * fast) + slow * kSustainedS / 8;
  // Trains that lost their replies overran the bucket (or its queue): a
  // stream three times the last of them empties it with room for the
  // sustained phase. One sized on the short trains that came back fast
  // alone could stay in it (10 Mbit/s, 300 KB, 25% CBR, runs back to back:
  // trains of 16 packets fast, of 128 silent, a 278 KB stream back whole at
  // 929 Mbit/s; the trains, sized on it, lost every reply, and the run ended
  // in replies_stopped, 2 runs of 6).
  if (h.trigger == "replies_lost") bytes = std::max(bytes, 3 * h.queued_bytes);
  double refill_s = 8.0 * (fast + h.queued_bytes) / slow;
  int shift_at = 0;
  bool confirming = false;
  bool confirmed = false;  // a confirming stream found the same bucket
  bool retried = false;  // a stream sent again after a stall: once per probe
  int grown = 0;         // streams that passed whole and were followed by a longer one
  double last_bucket = 0;
  // The streams leave 30% of --max-bytes to what follows them. After lost
  // replies: a policer passes their small markers whole, they grow into the
  // whole cap, and the policer stream after the trains (run_policer_probe)
  // found no room (lab, 5 Mbit/s policed: 35.5 MB of streams, 1 run of 3).
  // After any trigger, where phases follow the capacity phase: on a path
  // with no bucket, streams that pass whole grow until the cap, and the
  // avail-bw phase found none left (the random-path benchmark at 7c0be47,
  // path 32: a rate_drop trigger from trains under 51% TCP on a 106 Mbit/s
  // link, four streams of 49.5 MB in all, max_bytes after 5.7 s and no
  // avail-bw). `capacity` alone gives its streams what the trains left (a 3
  // MB bucket under --max-bytes 12 MB: one stream, test_shaper.py).
  const bool later_phases = c.command != Command::kCapacity;
  const double reserve = h.trigger == "replies_lost" || later_phases
                             ? 0.3 * static_cast<double>(c.max_bytes)
                             : 0;
  for (int k = 0; k < kMaxStreams && !stop.load(); ++k) {
    const double room = static_cast<double>(c.max_bytes) -
                        static_cast<double>(s.prober->bytes_sent()) - 64e3 - reserve;
    bytes = std::min({bytes, kMaxStreamBytes, room});
    if (bytes < 64e3) break;
    ShaperStreamParams p;
    p.flow = s.flow;
    p.packet_size = static_cast<std::uint16_t>(L);
    p.load_packets = shaper_load_packets(bytes, L);
    p.gap = gap;
    p.shift_at = shift_at;
    if (h.markers > 0 && k == 0) p.markers = h.markers;
    const Train t = make_shaper_train(p, -600 - k, s.seqs);
    // Idle: the queue drains and the bucket refills.
    const Nanos now = mono_now();
    const Nanos idle = std::min<Nanos>(from_seconds(std::min(refill_s, 5.0)),
                                       std::max<Nanos>(0, (t_cap - now) / 3));
    // Whether the bucket a confirming stream checks had its whole refill.
    const bool full_refill = to_seconds(idle) >= 0.95 * refill_s;
    const double rtt = path_rtt(s, rec);
    const Nanos quiet = stream_quiet(rtt);
    // (The routine check's first stream leaves at its pace.)
    const double rate_now = gap != back_to_back && h.pace_bps > 0 ? h.pace_bps : send_bps;
    const Nanos send_time = from_seconds(8.0 * static_cast<double>(t.total_bytes()) / rate_now);
    // Replies come back at the sustained rate, which may be far below what
    // the trains showed: wait long (up to the time cap), but stop when they
    // stop coming.
    const Nanos wait_replies =
        std::min<Nanos>(8 * kSec, std::max<Nanos>(0, t_cap - now - idle - send_time));
    // The wait a stream needs: four quiet spells, or, with a sustained rate
    // found, what the stream holds beyond the bucket at that rate, an RTT and
    // one quiet spell, if less. An RTT taken behind a standing queue (128 ms
    // behind a 10 Mbit/s bucket another run had just emptied) asked 6 s of a
    // 0.8 MB confirming stream, and it was never sent.
    Nanos need = 4 * quiet;
    if (h.stream_bytes > 0 && k == 0) {
      // The routine check's stream, paced, comes back as it leaves, or
      // shows its bucket before its end: two round trips and one quiet spell
      // after it is sent (it runs last in the capacity phase, after the
      // checks, and four quiet spells, 1.2 s at least, often did not fit).
      need = std::min(need, from_seconds(2 * rtt) + quiet);
    }
    if (rec.found && rec.rate_bps > 0) {
      const double beyond = std::max(0.0, static_cast<double>(t.total_bytes()) -
                                              std::max(rec.bucket_bytes, last_bucket));
      need = std::min(need, from_seconds(8.0 * beyond / rec.rate_bps + rtt) + quiet);
    }
    if (wait_replies < need) {
      if (c.verbose) {
        std::fprintf(stderr, "shaper stream %d: no time left (idle %.2f s, wait %.2f s, need %.2f s)\n",
                     k, to_seconds(idle), to_seconds(wait_replies), to_seconds(need));
      }
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
    {
      const ProbeOutcome& head = run.outcome.probes[static_cast<std::size_t>(t.markers.front())];
      const Nanos left = head.left > 0 ? head.left : head.sent;
      if (head.reply > left && left > 0) {
        const double r = to_seconds(head.reply - left);
        rec.head_rtt_s = rec.head_rtt_s > 0 ? std::min(rec.head_rtt_s, r) : r;
      }
    }
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
                   "stream %.4g overflow %.0f%s%s\n",
                   k, static_cast<unsigned long long>(t.total_bytes()), f.points,
                   f.found ? "found" : f.reason.c_str(), f.rate_bps, f.peak_bps, f.bucket_bytes,
                   f.stream_rate_bps, f.overflow_bits / 8, f.uncompressed ? " (uncompressed)" : "",
                   f.send_stall_bits > 0 ? " (our sending stalled early)" : "");
    }
    // Sent once more, as it was, when a stall says nothing reliable came
    // back: the replies stood still mid-stream (our host descheduled, the
    // path stalled) in a stream that would otherwise have shown a shaper; or
    // our own sending stood still before a bucket could have emptied and
    // the stream, compressed below half our sending, showed none (the bucket
    // refilled mid-stream: a 4 ms scheduler tick 25 KB into a 30 KB bucket
    // at 100 Mbit/s, with CPU hogs). Not a stream back about as fast as we
    // sent it: it hides no bucket a retry would show (an unshaped 1 Gbit/s
    // path sent a third stream, which its test refuses).
    const bool stood_still = f.paused && f.reason == kStoodStill;
    const bool send_stalled = !f.found && f.send_stall_bits > 0 && f.stream_rate_bps > 0 &&
                              f.stream_rate_bps < 0.5 * offered;
    if ((stood_still || send_stalled) && !retried && k + 1 < kMaxStreams) {
      retried = true;
      ++rec.stalled_streams;
      continue;
    }
    rec.stream_rate_bps = f.uncompressed ? 0 : f.stream_rate_bps;
    // The idle before this stream was too short for the measured rate to
    // refill a bucket that could hold what the trains saw pass fast, or this
    // stream found a clearly larger bucket than the last: the bucket was not
    // full. Again, after an idle that refills 2.5 times the estimate.
    const bool short_idle =
        idle_s < 8.0 * std::max(fast, 1.2 * f.bucket_bytes) / f.rate_bps;
    const bool grew = last_bucket > 0 && f.bucket_bytes > 1.15 * last_bucket;
    // A token bucket is a mechanism: a second stream after a full refill
    // finds the same sustained rate (the lab's buckets: within 0.2%) and,
    // refilled, a bucket at least as large (within 5%). A level shift that
    // cross traffic made (TCP on four links of benchmark path 38 at 842fe5b:
    // a "23 KB bucket" at 90 Mbit/s on a 123 Mbit/s link, capacity -27%,
    // avail-bw -60%; once more in 12 reruns, with no avail-bw at all) need
    // not come again. So a bucket cheap to confirm (its refill under 1 s) is
    // confirmed, and a confirming stream that contradicts it ends the
    // finding: another sustained rate (over 5% apart), or, after the whole
    // refill, a bucket under two thirds as large or one line at about the
    // sustained rate (a full bucket would have shown its burst).
    // Once a confirming stream has agreed, later ones (a bucket that grew
    // asks for another) do not cancel it: at 100 Mbit/s a 30 KB burst lasts
    // 0.3 ms, near the timing noise, and a third stream read one line after
    // two had found the same rate (the lab, with -v loading our CPU).
    // (After the paced stream, the confirming one, back to back, may read up
    // to 30% more: the share the other flows took of the paced one.)
    const double rate_ratio = rec.found ? f.rate_bps / rec.rate_bps : 1.0;
    const bool same_rate = first_paced ? rate_ratio >= 0.95 && rate_ratio <= 1.3
                                       : std::fabs(rate_ratio - 1) <= 0.05;
    if (f.found && confirming && rec.found && !confirmed &&
        (!same_rate ||
         (full_refill && f.bucket_bytes < 0.67 * rec.bucket_bytes))) {
      if (c.verbose) std::fprintf(stderr, "shaper: the confirming stream contradicts the first\n");
      forget_finding(rec);
      break;
    }
    // The other flows' packets that queued behind this stream's excess while
    // it drained (its tail's reply came back before they left) keep the
    // bucket empty a while longer: up to the drain's length again (20 Mbit/s
    // with 5 of CBR, a 2.2 MB stream into a 300 KB bucket: 0.77 s of drain,
    // a confirming stream 0.3 s later found 75 KB).
    const double drain_s =
        f.found ? 8.0 * std::max(0.0, static_cast<double>(t.total_bytes()) - f.bucket_bytes) /
                      f.rate_bps
                : 0.0;
    if (f.found && confirming && rec.found) confirmed = true;
    const bool cheap_confirm = 8.0 * 2.5 * f.bucket_bytes / f.rate_bps + drain_s <= 1.0;
    if (f.found && k + 1 < kMaxStreams &&
        ((!confirming && (short_idle || cheap_confirm || paced)) || grew)) {
      // (A finding of the routine check is always confirmed: on a path whose
      // trains showed nothing, a bucket needs a second look; and the
      // confirming stream, back to back, gives the sustained rate.)
      first_paced = !confirming && gap != back_to_back;
      gap = back_to_back;
      confirming = true;
      last_bucket = f.bucket_bytes;
      const double b = std::max(fast, 2.5 * f.bucket_bytes);
      // The markers go after the shift this stream saw; the stream runs on
      // far enough past it for a bucket up to 1.3 times larger. (Not twice:
      // past a full 3 MB bucket at 10 Mbit/s the shaper's queue overflowed
      // and took 33 of the 40 markers.)
      const double shift_bytes =
          f.bucket_bytes * f.peak_bps / std::max(1.0, f.peak_bps - f.rate_bps);
      const double sustained = f.rate_bps * 2 * kSustainedS / 8;
      refill_s = 8.0 * (b + (f.overflow_bits > 0 ? f.overflow_bits / 8 - f.bucket_bytes : 0)) /
                     f.rate_bps +
                 drain_s;
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
    if (rec.found && first_paced && gap == back_to_back && !f.found && f.overflow_bits > 0 &&
        k + 1 < kMaxStreams &&
        f.overflow_bits / 8 <
            rec.bucket_bytes * rec.peak_bps / std::max(1.0, rec.peak_bps - rec.rate_bps)) {
      // Sent back to back into a peak rate below our own, the confirming
      // stream filled the shaper's queue during the burst and overflowed
      // before the bucket could empty (3 MB behind 100 Mbit/s: one line at
      // the peak up to 2.4 MB): it says nothing. Once more, paced as the
      // first, after the queue it filled has drained.
      gap = paced_gap;
      refill_s += 8.0 * (f.overflow_bits / 8) / rec.rate_bps;
      continue;
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
    const bool fast_line = f.stream_rate_bps > 1.25 * rec.rate_bps;
    if (rec.found && ((f.reason == "no level shift" && (fast_line || (full_refill && !confirmed))) ||
                      (f.reason == "burst too small" && fast_line))) {
      // The confirming stream came back as one line, well above the
      // sustained rate found: no bucket of the size found lets a stream
      // this long through that fast; or, after the whole refill, as one
      // line at about it: a full bucket would have shown its burst. The
      // first stream's shift was noise (a busy host, a router that stalled,
      // cross traffic): no shaper. (A "burst" under the detector's floor
      // ahead of such a line is the head's timing: benchmark path 7 at
      // 86b52ad, this host's on/off traffic in our own 10 Mbit/s htb, read
      // 4.84 sustained after 29 KB; the confirming streams, up to 1.6 MB,
      // came back as one line at 9.9 and the last one's 3 KB "burst" kept
      // the finding.)
      forget_finding(rec);
      break;
    }
    if (rec.found) break;  // a confirming stream failed: keep the earlier finding
    if (f.points < 5) {
      rec.verdict = "no_replies";
      break;
    }
    const bool passed_whole = stream_passed_whole(f, h);
    if (passed_whole && grown >= h.growths) {
      // A fast path that the trains could not tell from a bucket: the
      // streams passed whole too. No shaper claimed; shaper_check says how
      // large a bucket could still hide (its stream_bytes).
      // (After the routine check, "none", as for a stream that came back
      // slower: the same bytes said the same, no bucket they emptied.)
      rec.verdict = h.trigger == "routine" ? "none" : "not_emptied";
      rec.bucket_at_least_bytes = static_cast<double>(t.total_bytes());
      // (What a stream before it that passed whole set says no more.)
      rec.not_emptied = false;
      rec.peak_bps = 0;
      rec.peak_is_lower_bound = false;
      break;
    }
    // After capacity_lower_bound (trains as fast as we send), a stream that
    // came back as one line did not empty a bucket in view, whatever its
    // rate: at under half the trains' it met one the trains had left
    // part-full, near its end, or the tail of its queue (a 3 MB bucket at 20
    // Mbit/s under cross traffic: 2.5 MB back at 398 Mbit/s, trains at 1
    // Gbit/s); near the trains' rate it stayed inside it (the fastest sizing
    // train is no steady reference: a 2.7 MB stream back at 976 Mbit/s was
    // under 0.8 of it, and the probe said "none" again). Nor did one that
    // showed a shift it could not stand by (a burst within the timing noise,
    // a sustained phase at our own sending rate...): 2.6 MB back at 975
    // Mbit/s said "none" once more. A longer stream, as for one that passed
    // whole.
    const bool lower_bound_stream = h.trigger == "capacity_lower_bound" && !f.found &&
                             f.stream_rate_bps > 0 && grown < h.growths;
    if (passed_whole || lower_bound_stream) {
      // The whole stream passed at the rate we sent it: a bucket larger
      // than the stream, or no shaper and a path at least that fast.
      rec.not_emptied = true;
      rec.verdict = "not_emptied";
      rec.bucket_at_least_bytes = static_cast<double>(t.total_bytes());
      rec.peak_bps = f.stream_rate_bps;
      rec.peak_is_lower_bound = true;
      refill_s = 8.0 * bytes / slow;
      bytes *= h.growth;
      ++grown;
      continue;
    }
    const bool short_shift =
        f.reason == "sustained phase too short" && f.rate_bps > 0 && f.peak_bps > f.rate_bps;
    const double shift_bytes =
        short_shift ? f.bucket_bytes * f.peak_bps / (f.peak_bps - f.rate_bps) : 0.0;
    if (short_shift && rec.not_emptied &&
        shift_refuted_by_whole_stream(shift_bytes, f.rate_bps, rec.bucket_at_least_bytes,
                                      rec.peak_bps)) {
      // An earlier stream passed whole past this shift, faster than the
      // rate after it: no bucket; what that stream showed stands.
      if (c.verbose) std::fprintf(stderr, "shaper: an earlier stream passed whole past that shift\n");
      break;
    }
    rec.verdict = "none";
    rec.not_emptied = false;
    if (short_shift) {
      // A shift near the end (or before the shaper's queue overflowed): a
      // stream that ends a little after the shift, its markers after it.
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
      gap = back_to_back;
      continue;
    }
    break;
  }
  return rec;
}

void apply_shaper(const ShaperRecord& rec, CapacityResult& res) {
  res.shaper = rec;
  if (rec.found) {
    if (res.before_shaper.is_null()) {
      res.before_shaper = {{"valid", res.valid},
                           {"lower_bound", res.lower_bound},
                           {"capacity_bps", res.capacity_bps},
                           {"low_bps", res.low_bps},
                           {"high_bps", res.high_bps},
                           {"kde_bandwidth_bps", res.kde_bandwidth_bps},
                           {"source", res.capacity_source},
                           {"warnings", warnings_json(res.warnings)}};
    }
    // The trains' own verdicts described the burst, not the path.
    take_capacity(res, rec.rate_bps, rec.rate_low_bps,
                  std::isfinite(rec.rate_high_bps) ? rec.rate_high_bps : rec.rate_bps,
                  "shaper_stream",
                  {"no_estimate", "capacity_lower_bound", "slope_too_noisy", "load_loss_suspected",
                   "single_length_estimate", "max_rate_limited", "capacity_at_send_rate",
                   "trains_shortened"});
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

PolicerProbe run_policer_probe(Session& s, const Config& c, const std::atomic<bool>& stop,
                               Nanos t_cap, double load_bytes) {
  PolicerProbe out;
  const Nanos t0 = mono_now();
  const int L = s.packet_size;
  PolicerStreamParams p;
  p.flow = s.flow;
  p.packet_size = static_cast<std::uint16_t>(L);
  p.gap = min_gap_for_rate(c.max_rate_bps, L + 40);
  PolicerFinding f;
  int streams = 0, load_markers = 0, load_answered = 0;
  std::uint64_t stream_bytes = 0;
  // A stream whose every marker passed met no bucket it emptied: once more,
  // 2.5 times the load. (A policer's bucket can hold a second of its rate:
  // nftables' `limit rate over R bytes/second burst B bytes` holds R + B.)
  // It leaves a fifth of --max-bytes to the phases after it (the avail-bw
  // search of an unshaped gigabit lab path took 8 MB of the 14 left after a
  // capacity phase of 35.5 MB: 2 streams of 14 MB left it 0.3 MB, and it
  // stopped on max_bytes with no estimate).
  for (int k = 0; k < 2 && !stop.load(); ++k, load_bytes *= 2.5) {
    const double room = 0.8 * static_cast<double>(c.max_bytes) -
                        static_cast<double>(s.prober->bytes_sent()) -
                        static_cast<double>(
                            (p.bucket_markers * p.markers_per_position + p.chirp_markers) * L);
    p.load_packets = std::min(8000, static_cast<int>(std::min(load_bytes, room) / L));
    if (p.load_packets < 100) break;
    const Train t = make_policer_train(p, -800 - k, s.seqs);
    const Nanos quiet = stream_quiet(s.disc.rtt_s);
    const Nanos chirp_span = t.probes.back().offset;
    const Nanos wait = std::min<Nanos>(2 * kSec, 4 * quiet);
    // --max-load: the stream counts in the ledger like a train; not when that
    // wait would pass the cap.
    const Nanos ready = load_ready(s, c, t.total_bytes());
    if (ready + chirp_span + wait > t_cap) break;
    while (mono_now() < ready && !stop.load()) sleep_until(ready);
    if (stop.load() || !wait_for_reply_budget(s, s.dst, static_cast<int>(t.markers.size()),
                                              t_cap - chirp_span - wait)) {
      break;
    }
    s.prober->note(note_json(ShaperStreamNote{t.id, t.total_bytes()}));
    const TrainRun run = s.prober->run(t, t.markers, wait, false, 2 * kMs, 0, quiet);
    ++streams;
    stream_bytes += t.total_bytes();
    // Every packet of the stream as sent, the load's too (its gaps: the
    // bucket's estimate), the warm-up SYN ahead of it not.
    std::vector<PolicerPoint> pts;
    const int chirp_from = static_cast<int>(t.markers.size()) - p.chirp_markers;
    load_markers = load_answered = 0;
    std::size_t m = 0;
    for (std::size_t i = 0; i < t.probes.size(); ++i) {
      const bool marker = m < t.markers.size() && static_cast<std::size_t>(t.markers[m]) == i;
      const ProbeOutcome& o = run.outcome.probes[i];
      const bool sent = run.sent.size() > i && run.sent[i].sent;
      if (t.probes[i].role == Role::kWarmup || (!marker && !sent)) continue;
      PolicerPoint pt;
      pt.marker = marker;
      pt.bits = 8.0 * t.probes[i].ip_len;
      pt.sent = sent ? run.sent[i].actual : o.sent;
      // The chirp's markers, and what was sent past its first one.
      pt.chirp = marker ? static_cast<int>(m) >= chirp_from : static_cast<int>(m) > chirp_from;
      if (marker) {
        pt.bits_before = t.bits_from_head[m];
        pt.reply = o.reply > 0 ? o.reply - o.sent + pt.sent : 0;  // on the send clock
        if (!pt.chirp) {
          pt.position = static_cast<int>(m) / p.markers_per_position;
          ++load_markers;
          load_answered += o.reply > 0 ? 1 : 0;
        }
        ++m;
      }
      pts.push_back(pt);
    }
    PolicerOptions po;
    // Open-port markers: our kernel answers each SYN/ACK with an RST.
    if (s.flow.marker == TargetMarker::kOpenSyn) po.echo_bits = 8.0 * bare_tcp_len(s.dst);
    f = detect_policer(pts, 8.0 * L, po);
    if (c.verbose) {
      std::fprintf(stderr,
                   "policer stream %d: %llu bytes, load markers %d of %d, chirp %d of %d "
                   "answered: %s rate %.4g [%.4g, %.4g] bucket [%.0f, %.0f]\n",
                   k, static_cast<unsigned long long>(t.total_bytes()), load_answered,
                   load_markers, f.chirp_answered, f.chirp_markers,
                   f.found ? "found" : f.reason.c_str(), f.rate_bps, f.rate_low_bps,
                   f.rate_high_bps, f.burst_low_bytes, f.burst_high_bytes);
    }
    if (f.found || load_answered < load_markers || f.chirp_answered < f.chirp_markers) break;
  }
  if (streams == 0) return out;
  out.ran = true;
  out.finding = f;
  auto nullable_pos = [](double v) { return v > 0 ? nlohmann::json(v) : nlohmann::json(); };
  out.record = {{"verdict", f.found ? "found" : "none"},
                 {"reason", f.found ? "" : f.reason},
                 {"rate_bps", f.found ? nlohmann::json(f.rate_bps) : nlohmann::json()},
                 {"rate_low_bps", f.found ? nlohmann::json(f.rate_low_bps) : nlohmann::json()},
                 {"rate_high_bps", f.found ? nlohmann::json(f.rate_high_bps) : nlohmann::json()},
                 {"rate_is_upper_bound", f.rate_is_upper_bound},
                 {"bucket_bytes_low", f.found ? nullable_pos(f.burst_low_bytes) : nlohmann::json()},
                 {"bucket_bytes_high", f.found ? nullable_pos(f.burst_high_bytes) : nlohmann::json()},
                 {"load_markers", load_markers},
                 {"load_answered", load_answered},
                 {"chirp_markers", f.chirp_markers},
                 {"chirp_answered", f.chirp_answered},
                 {"streams", streams},
                 {"stream_bytes", stream_bytes},
                 {"elapsed_s", to_seconds(mono_now() - t0)}};
  return out;
}

void apply_policer(const PolicerProbe& p, CapacityResult& res) {
  if (!p.ran) return;
  res.policer = p.record;
  const PolicerFinding& f = p.finding;
  if (!f.found) return;
  take_capacity(res, f.rate_bps, f.rate_low_bps, f.rate_high_bps, "policer",
                {"capacity_lower_bound", "max_rate_limited", "capacity_at_send_rate"});
  std::string bucket = "a bucket";
  if (f.burst_low_bytes > 0 && f.burst_high_bytes > 0) {
    bucket = "a bucket of " + kb(f.burst_low_bytes) + " to " + kb(f.burst_high_bytes);
  } else if (f.burst_low_bytes > 0) {
    bucket = "a bucket of at least " + kb(f.burst_low_bytes);
  } else if (f.burst_high_bytes > 0) {
    bucket = "a bucket of at most " + kb(f.burst_high_bytes);
  }
  res.warnings.push_back(
      {WarningCode::kPolicer,
       "a policer: every train came back at our own rate, but full-size packets past " + bucket +
           " were dropped, not delayed, and from about " +
           (f.rate_is_upper_bound ? "below " : "") + format_rate(f.rate_bps) +
           " down every one passed (" + std::to_string(f.chirp_answered) + " of " +
           std::to_string(f.chirp_markers) +
           " chirp markers answered): the capacity is the policed rate; the avail-bw is not "
           "measured (paced trains pass inside its bucket, refilled between them)"});
}

bool unapply_shaper(CapacityResult& res, int refill_pairs) {
  const nlohmann::json& b = res.before_shaper;
  if (!b.is_object() || !res.shaper.found) return false;
  const ShaperRecord claimed = res.shaper;
  res.valid = b.at("valid").get<bool>();
  res.lower_bound = b.at("lower_bound").get<bool>();
  res.capacity_bps = b.at("capacity_bps").get<double>();
  res.low_bps = b.at("low_bps").get<double>();
  res.high_bps = b.at("high_bps").get<double>();
  res.kde_bandwidth_bps = b.at("kde_bandwidth_bps").get<double>();
  res.capacity_source = b.at("source").get<std::string>();
  // The trains' warnings, and those added since that are not the bucket's.
  std::vector<Warning> ws = warnings_from_json(b.at("warnings"));
  for (const Warning& w : res.warnings) {
    const bool had = std::any_of(ws.begin(), ws.end(), [&](const Warning& x) {
      return x.code == w.code && x.message == w.message;
    });
    if (!had && w.code != warning_name(WarningCode::kTokenBucket)) ws.push_back(w);
  }
  res.warnings = std::move(ws);
  const std::string refill = std::to_string(refill_pairs) + " refill pairs";
  res.warnings.push_back(
      {WarningCode::kShaperRefuted,
       "the shaper streams showed a level shift (" + format_rate(claimed.rate_bps) +
           " sustained after " + kb(claimed.bucket_bytes) + " at " +
           format_rate(claimed.peak_bps) + "), but " + refill +
           " sized for that bucket saw no refill: cross traffic, not a token bucket; the "
           "capacity is the trains' and the avail-bw the paced-train search's"});
  forget_finding(res.shaper);
  res.shaper.verdict = kShaperRefutedVerdict;
  res.before_shaper = nullptr;
  add_systematic_margin(res);
  return true;
}

void merge_refill(AvailbwResult& search, const AvailbwResult& refill) {
  search.rates.insert(search.rates.begin(), refill.rates.begin(), refill.rates.end());
  search.trains_sent += refill.trains_sent;
  search.elapsed_s += refill.elapsed_s;
  search.probe_bytes += refill.probe_bytes;
  search.probe_packets += refill.probe_packets;
  std::vector<Warning> ws;
  for (const Warning& w : refill.warnings) {
    if (w.code != warning_name(WarningCode::kTokenBucket)) ws.push_back(w);
  }
  search.warnings.insert(search.warnings.begin(), ws.begin(), ws.end());
}

namespace {

// The refill pairs' avail-bw: the median of the pairs, with their spread
// widened by what tau is not sure of (the RTT counted in it, `tau_error`)
// and a couple of percent of content fit.
void conclude_refill(const std::vector<double>& got, double R, double tau_error,
                     AvailbwResult& res) {
  if (res.stop_reason == StopReason::kNone) res.stop_reason = StopReason::kShaper;
  if (got.empty()) {
    res.warnings.push_back(
        {WarningCode::kTokenBucket,
         "a token bucket was found but its refill could not be measured within the caps: no "
         "avail-bw for its sustained regime"});
    return;
  }
  res.valid = true;
  res.basis = "token_bucket_refill";
  res.availbw_bps = median(got);
  const double widen = 0.02 + tau_error;
  res.low_bps = std::max(0.0, *std::min_element(got.begin(), got.end()) * (1 - widen));
  res.high_bps = std::min(R, *std::max_element(got.begin(), got.end()) * (1 + widen));
  res.high_bps = std::max(res.high_bps, res.availbw_bps);
  res.warnings.push_back(
      {WarningCode::kTokenBucket,
       "the avail-bw is the token bucket's refill rate: what the other traffic leaves of the "
       "sustained " + format_rate(R) + " (" + std::to_string(got.size()) +
           " refills measured; the paced-train search would read the burst)"});
}

}  // namespace

AvailbwResult run_shaper_availbw(Session& s, const Config& c, const std::atomic<bool>& stop,
                                 ShaperRecord& rec, Nanos t_cap) {
  AvailbwResult res;
  res.method = name(c.method);
  const PhaseStart at = phase_start(s);
  const double R = rec.rate_bps;
  // The bucket the streams found; grown below when the emptying streams show
  // it was larger (a stream that reads a bucket not yet full after the idle
  // before it finds a smaller one).
  double B = rec.bucket_bytes;
  s.prober->note(phase_note_json(AvailbwRunNote{R, s.packet_size, t_cap, config_json(c), true}));
  res.search_capacity_bps = R;
  res.tight_link_capacity_bps = R;
  const int L = s.packet_size;
  const Nanos gap = min_gap_for_rate(c.max_rate_bps, L + 40);
  const double send_bps = c.max_rate_bps;
  // Stream bytes that pass by the time a bucket of b bytes is empty: b·P/(P - R).
  const double P = std::max(rec.peak_bps, 1.4 * R);
  const double fill = P / (P - R);
  const double rtt = path_rtt(s, rec);
  double tau = 0;
  ShaperOptions opt;
  auto size_for_bucket = [&] {
    // The idle between the pair's streams: the bucket refills to at most 60%.
    tau = std::clamp(0.6 * 8.0 * B / R, 0.005, 3.0);
    // The bucket is known: the detector's floor (there against false shapers
    // on ordinary paths) can be lower, a tenth of it or two packets.
    opt.min_bucket_bytes = std::min(ShaperOptions{}.min_bucket_bytes, std::max(0.1 * B, 2.0 * L));
  };
  size_for_bucket();
  const Nanos quiet = stream_quiet(rtt);
  // Sends one stream at once; false when a cap or the time ends the phase.
  // Markers: the emptying stream needs only its tail's reply (and a few to
  // tell the replies arrived); the reading stream's carry the fit. Both
  // streams' replies are asked of the reply budget before the first, so the
  // second never waits for it (the idle between them is timed).
  constexpr int kEmptyMarkers = 4;
  constexpr int kReadMarkers = 24;
  auto stream = [&](double bytes, double shift_bytes, int markers, int budget, int id,
                    TrainRun* run, Train* t) {
    ShaperStreamParams p;
    p.markers = markers;
    p.flow = s.flow;
    p.packet_size = static_cast<std::uint16_t>(L);
    p.load_packets = shaper_load_packets(bytes, L);
    p.gap = gap;
    p.shift_at = static_cast<int>(shift_bytes / L);
    *t = make_shaper_train(p, id, s.seqs);
    const Nanos now = mono_now();
    const Nanos send_time = from_seconds(8.0 * static_cast<double>(t->total_bytes()) / send_bps);
    // Its replies come back at R: the bytes past the bucket take that long.
    const Nanos drain = from_seconds(8.0 * static_cast<double>(t->total_bytes()) / R);
    const Nanos wait = std::min<Nanos>(8 * kSec, 2 * drain + 4 * quiet);
    if (now + send_time + wait > t_cap) {
      res.stop_reason = StopReason::kMaxTime;
      return false;
    }
    if (static_cast<double>(s.prober->bytes_sent() + t->total_bytes()) + 64e3 >
        static_cast<double>(c.max_bytes)) {
      res.stop_reason = StopReason::kMaxBytes;
      return false;
    }
    if (budget > 0 && !wait_for_reply_budget(s, s.dst, budget, t_cap - wait)) {
      res.stop_reason = stop.load() ? StopReason::kInterrupted : StopReason::kMaxTime;
      return false;
    }
    s.prober->note(note_json(ShaperRefillStreamNote{t->id, t->total_bytes()}));
    *run = s.prober->run(*t, t->markers, wait, false, 2 * kMs, 0, quiet);
    ++res.trains_sent;
    rec.refill_bytes += t->total_bytes();
    return true;
  };
  std::vector<double> got;
  // The capacity phase's last stream may have left the shaper's queue full:
  // let it drain and the bucket fill (2.5 times its refill, 0.25-8 s, at most
  // a third of the time left).
  // The emptying stream's excess over a bucket that is not full would
  // queue, or overflow the queue and lose its tail.
  Nanos next = mono_now() + std::min<Nanos>(from_seconds(std::clamp(2.5 * 8.0 * B / R, 0.25, 8.0)),
                                            std::max<Nanos>(0, (t_cap - mono_now()) / 3));
  int id = -700;
  double worst_tau_error = 0;
  // A short idle holds few of the other flows' packets (a 1500-byte packet
  // in 15 ms is 0.8 Mbit/s): with tau under 50 ms, three pairs at least, at
  // random phases.
  std::mt19937 rng(static_cast<unsigned>(real_now()));
  std::uniform_int_distribution<Nanos> jitter(0, 10 * kMs);
  int grown = 0;
  // Pairs that contradicted the bucket (refill_contradicts_bucket): two, and
  // none read a refill, refute it: the caller drops the shaper and searches.
  int contradicting = 0;
  bool refuted = false;
  for (int pair = 0; pair < 5 + grown && !stop.load(); ++pair) {
    const std::size_t min_pairs = tau < 0.05 ? 3 : 2;
    if (got.size() >= min_pairs + 1) break;
    if (got.size() >= min_pairs &&
        *std::max_element(got.begin(), got.end()) <=
            1.1 * *std::min_element(got.begin(), got.end()) + 0.01 * R) {
      break;
    }
    next += jitter(rng);
    // No sleep past the time cap (the streams check it again before sending).
    if (next > t_cap) {
      res.stop_reason = StopReason::kMaxTime;
      break;
    }
    while (mono_now() < next && !stop.load()) sleep_until(next);
    if (stop.load()) break;
    const Nanos pair_start = mono_now();
    const std::uint64_t pair_bytes0 = s.prober->bytes_sent();
    RateRecord rr;
    rr.phase = "shaper_refill";
    rr.at_s = to_seconds(pair_start - at.t0);
    // 1. Empty the bucket: past its content by 10% and two packets (they
    //    queue: their wait delays the refill, see refill_sample), the tail's
    //    reply says when the shaper's queue ran dry.
    TrainRun e;
    Train te;
    if (!stream(1.1 * B * fill + 2.0 * L, B * fill, kEmptyMarkers,
                kEmptyMarkers + kReadMarkers + 2, id--, &e, &te)) {
      break;
    }
    const ProbeOutcome& tail = e.outcome.probes[static_cast<std::size_t>(te.markers.back())];
    double used_tau = 0;
    double tail_wait = 0;
    RefillSample sample;
    ShaperFinding fd;
    if (tail.reply > 0) {
      // 2. An idle of tau from when the tail left the shaper (its reply less
      //    the way back; the next head reaches the shaper after the way out:
      //    together one RTT), then the stream that reads the content.
      const Nanos head_at = tail.reply + from_seconds(tau - rtt);
      const Nanos wait = head_at - real_now();
      if (wait > 0) {
        const Nanos until = mono_now() + wait;
        while (mono_now() < until && !stop.load()) sleep_until(until);
      }
      const double b_max = std::min(B, R * tau / 8);
      const double sustained = std::max(24.0 * L, R * 0.03 / 8);
      TrainRun f;
      Train tf;
      // Its dense markers start at half the content an idle path would
      // leave: the other flows take their share of the refill, and the
      // shaper's queue drops the stream's tail past the shift. From b_max
      // on, a 3 MB bucket at 10 Mbit/s under 25% cross traffic (content
      // 1.1 MB of 1.8) had one marker past the shift before the tail was
      // dropped, and no pair read a refill.
      if (!stream(1.15 * b_max * fill + sustained, 0.5 * b_max * fill, kReadMarkers, 0, id--,
                  &f, &tf)) {
        break;
      }
      const ProbeOutcome& head = f.outcome.probes[static_cast<std::size_t>(tf.markers.front())];
      const Nanos left = head.left > 0 ? head.left : head.sent;
      used_tau = to_seconds(left - tail.reply) + rtt;
      // The tail waited D in the shaper's queue; the other flows' packets that
      // arrived meanwhile left after it, on tokens of the refill.
      const Nanos tail_left = tail.left > 0 ? tail.left : tail.sent;
      tail_wait = std::max(0.0, to_seconds(tail.reply - tail_left) - rtt);
      double offered = send_bps;
      const std::size_t h = static_cast<std::size_t>(tf.markers.front());
      const std::size_t tl = static_cast<std::size_t>(tf.markers.back());
      if (f.sent.size() > tl && f.sent[h].sent && f.sent[tl].sent &&
          f.sent[tl].actual > f.sent[h].actual) {
        offered = tf.bits_from_head.back() / to_seconds(f.sent[tl].actual - f.sent[h].actual);
      }
      fd = detect_shaper(points_of(tf, f.outcome), offered, opt);
      sample = refill_sample(fd, R, B, used_tau, opt, tail_wait);
      if (c.verbose) {
        std::fprintf(stderr,
                     "shaper refill %d: tau %.2f ms (planned %.2f), tail wait %.2f ms, %s content "
                     "%.0f bytes: %.4g bit/s%s\n",
                     pair, used_tau * 1e3, tau * 1e3, tail_wait * 1e3, fd.found ? "found" : fd.reason.c_str(),
                     sample.content_bytes, sample.availbw_bps,
                     sample.saturated ? " (saturated)" : sample.ok ? "" : " (unusable)");
      }
    } else if (c.verbose) {
      std::fprintf(stderr, "shaper refill %d: the emptying stream's tail was not answered\n", pair);
    }
    // The emptying stream went 10% and two packets past the bucket.
    const bool not_emptied =
        tail.reply > 0 &&
        refill_left_tokens(sample, R, P, used_tau, tail_wait, 0.1 * B * fill + 2.0 * L, L);
    rr.rate_bps = sample.availbw_bps;
    rr.received_bps = sample.availbw_bps;
    rr.verdict = not_emptied       ? "not_emptied"
                 : sample.ok        ? "refill"
                 : sample.saturated ? "saturated"
                                    : "unusable";
    res.rates.push_back(rr);
    // A pair that could not empty a bucket that may be larger than found is
    // no contradiction while the pairs can still grow (below).
    const bool may_grow = not_emptied && grown < 3 && bucket_may_be_larger(rec.peak_bps, R);
    if (tail.reply > 0 && !may_grow &&
        refill_contradicts_bucket(sample, fd, R, B, used_tau, not_emptied, opt)) {
      ++contradicting;
    }
    if (got.empty() && contradicting >= 2) {
      if (c.verbose) {
        std::fprintf(stderr, "shaper refill: %d pairs contradict the bucket: refuted\n",
                     contradicting);
      }
      refuted = true;
      break;
    }
    if (sample.ok && !not_emptied) {
      got.push_back(sample.availbw_bps);
      rec.refill_bps.push_back(sample.availbw_bps);
      ++rec.refill_pairs;
      rec.refill_idle_s = used_tau;
      worst_tau_error = std::max(worst_tau_error, rtt / used_tau);
    } else if (not_emptied) {
      // The bucket held more than B: the stream that found B began on a
      // bucket not yet full (a confirming stream after too short an idle).
      // Again with twice the bucket, up to three times.
      if (grown < 3) {
        ++grown;
        B *= 2;
        size_for_bucket();
        if (c.verbose) {
          std::fprintf(stderr, "shaper refill: the bucket was not emptied; %.0f bytes\n", B);
        }
      }
    } else if (sample.saturated) {
      tau /= 2;  // the bucket filled up in tau: R was underestimated
    }
    // --max-load: the pair's bytes, averaged over the pair and the idle after
    // it, stay under max_load of the sustained rate.
    const double bits = 8.0 * static_cast<double>(s.prober->bytes_sent() - pair_bytes0);
    next = pair_start + from_seconds(bits / (c.max_load * R));
  }
  if (refuted) {
    rec.verdict = kShaperRefutedVerdict;
  } else {
    conclude_refill(got, R, worst_tau_error, res);
  }
  const nlohmann::json own_warnings = warnings_json(res.warnings);
  const std::vector<Warning> reply =
      close_phase(s, at, res.warnings, &res.probe_bytes, &res.probe_packets, &res.elapsed_s);
  ShaperRefillNote refill{res.valid,       c.method,          res.availbw_bps,
                          res.low_bps,     res.high_bps,      R,
                          res.trains_sent, res.stop_reason,   own_warnings,
                          {},              shaper_check_json(rec)};
  for (const RateRecord& r : res.rates) refill.rates.push_back({r.rate_bps, r.verdict, r.at_s});
  s.prober->note(phase_note_json(AvailbwEndNote{res.elapsed_s, res.probe_bytes, res.probe_packets,
                                                warnings_json(reply), refill, nullptr}));
  return res;
}

AvailbwResult shaper_availbw_from_note(const std::optional<AvailbwEndNote>& end,
                                       ShaperRecord& rec) {
  AvailbwResult res;
  if (!end) {
    res.stop_reason = StopReason::kIncomplete;
    return res;
  }
  if (!end->shaper_refill) {
    throw nlohmann::json::other_error::create(501, "a refill phase's end note without its result",
                                              nullptr);
  }
  const ShaperRefillNote& j = *end->shaper_refill;
  res.valid = j.valid;
  if (j.valid) res.basis = "token_bucket_refill";
  res.method = name(j.method);
  res.availbw_bps = j.availbw_bps;
  res.low_bps = j.low_bps;
  res.high_bps = j.high_bps;
  res.search_capacity_bps = j.capacity_bps;
  res.tight_link_capacity_bps = res.search_capacity_bps;
  res.trains_sent = j.trains_sent;
  res.stop_reason = j.stop_reason;
  res.warnings = warnings_from_json(j.warnings);
  for (const RefillRateNote& r : j.rates) {
    RateRecord rr;
    rr.phase = "shaper_refill";
    rr.rate_bps = r.rate_bps;
    rr.received_bps = rr.rate_bps;
    rr.verdict = r.verdict;
    rr.at_s = r.at_s;
    res.rates.push_back(rr);
  }
  const ShaperRecord noted = shaper_from_json(nlohmann::json(), j.shaper_check);
  rec.refill_pairs = noted.refill_pairs;
  rec.refill_bytes = noted.refill_bytes;
  rec.refill_idle_s = noted.refill_idle_s;
  rec.refill_bps = noted.refill_bps;
  if (noted.verdict == kShaperRefutedVerdict) rec.verdict = noted.verdict;
  res.elapsed_s = end->elapsed_s;
  res.probe_bytes = end->probe_bytes;
  res.probe_packets = end->probe_packets;
  for (const Warning& w : warnings_from_json(end->reply_warnings)) res.warnings.push_back(w);
  return res;
}

}  // namespace lw
