#pragma once
// Token-bucket shaper detection from one long rate-constant stream (ShaperProbe,
// Kanuparthy & Dovrolis, IMC 2011, §3: a stream long enough to empty the
// bucket; the received rate shows a level shift from the peak to the sustained
// rate, and the time to the shift gives the bucket). Single-ended: the stream
// is RST load with a few SYN markers; each marker's reply time against the
// bits sent ahead of it (from the head marker) is one point of the
// cumulative-delivery curve.
//
// A token bucket (rate R, depth B, peak P) full at the head delivers bits at P
// until it is empty, then at R: the received curve t(bits) is two lines, and
// the line of the sustained phase, extended back to the head, crosses it at
// t = -B'/R, where B' is the bucket's content when the head arrived (the
// bucket drains at P - R for B/(P - R) seconds while P·t bits pass: P·t - R·t
// = B). That intercept is robust where the time of the shift itself is not
// (few markers around it). A stream sent faster than R eventually fills the
// shaper's queue; once it drops, markers come back at the send spacing (a
// third, steep phase), which is cut off before the fit.
//
//   std::vector<ShaperPoint> pts = ...;    // head first: bits 0, its reply
//   ShaperFinding f = detect_shaper(pts, offered_bps);
//   if (f.found) { f.rate_bps; f.peak_bps; f.bucket_bytes; }
//
// Pure: no sockets, clocks or globals.
#include <string>
#include <vector>

#include "linkwidth/time.hpp"

namespace lw {

struct ShaperPoint {
  double bits = 0;  // IP bits sent after the head marker up to and including this marker
  Nanos reply = 0;  // reply arrival time; 0 = lost
  // When we handed it to the kernel (user space, before our own qdisc); 0 =
  // unknown. A sustained phase no slower than our own sending is not a shaper.
  Nanos sent = 0;
};

struct ShaperOptions {
  // The peak must exceed the sustained rate by this factor (a level shift).
  double min_shift = 1.4;
  // Replies in the sustained phase, at least (a few slow replies at the end
  // of a stream are cross traffic, not a rate).
  int min_sustained_points = 5;
  // Smallest bucket reported (bytes): the head and tail replies of an ordinary
  // path differ by fixed offsets (a host waking up) worth a few packets.
  double min_bucket_bytes = 8000;
  // The burst phase must stand out of the sustained line's timing noise by
  // this many standard deviations, and by at least min_burst_time.
  double noise_sigmas = 4.0;
  Nanos min_burst_time = 100 * kUs;
  // The sender must have offered the sustained phase's bits at least this
  // much faster than they came back, or the shift is our own sending's.
  double min_send_excess = 1.15;
  // ... and the burst phase came back at most this much faster than we sent
  // its bits (faster: replies bunched behind a late head, not a bucket).
  double max_peak_over_sent = 1.5;
  // A reply interval in the sustained phase longer than twice what the rate
  // spaces it by, and by at least this much, is a stall, not the shaper.
  Nanos min_pause = 5 * kMs;
  // A shorter step in the reply curve (remove_steps in shaper.cpp): taken
  // out when it stands at least this far, and 6 robust standard deviations,
  // above the intervals' scatter, up to this many per stream.
  Nanos min_step = 400 * kUs;
  int max_steps = 2;
  // Our own sending standing still this much longer than the stream's usual
  // spacing, early enough that the bucket's refill over it outweighs a
  // quarter of what was sent before: ShaperFinding::send_stall_bits.
  Nanos min_send_stall = 500 * kUs;
  // The sustained rate's 95% interval (2 standard errors of the slope) no
  // wider than +-this share of it: a token bucket's sustained phase is one
  // line (simulated buckets: +-1%; a result that claims a sustained rate
  // within 3% cannot rest on a wider one). Cross traffic that arrives in bursts and starts mid-stream (a TCP
  // flow's windows) also shifts the level, but the "sustained" phase it
  // leaves is ragged (the random-path benchmark's path 14 at 2261564: 61.7
  // Mbit/s behind TCP on three links read as a bucket of 19 KB with a
  // sustained 44.8 in [33.9, 65.7], -27% capacity, and the avail-bw taken
  // from a refill that was not there).
  double max_rate_spread = 0.1;
};

// ShaperFinding::reason when a stall alone kept the stream from showing a
// shaper (pause_s says how long).
inline constexpr const char* kStoodStill = "the replies stood still mid-stream";

struct ShaperFinding {
  bool found = false;
  // The stream came back at (about) the rate it was offered, with no level
  // shift: whatever the path holds in a bucket is at least the stream's bits.
  bool uncompressed = false;
  double rate_bps = 0;            // sustained rate (the sustained phase's slope)
  double rate_low_bps = 0;        // about 95% interval of the slope (2 standard errors)
  double rate_high_bps = 0;
  double peak_bps = 0;            // received rate before the shift
  bool peak_at_offered = false;   // the burst phase came at the offered rate: the peak is at least that
  double bucket_bytes = 0;        // the bucket's content at the head (IP bytes)
  double stream_rate_bps = 0;     // one line through every used point (no shaper: the path's rate)
  double offered_bps = 0;         // the rate the stream was sent at (0: unknown)
  Nanos shift_time = 0;           // reply time of the shift, relative to the head reply
  int points = 0;                 // replies used
  int burst_points = 0;           // of them in the burst phase (head included)
  int dropped_tail = 0;           // points cut off at the end (the shaper's queue overflowed)
  double overflow_bits = 0;       // bits (after the head) where that began; 0 if it did not
  // The replies stood still for a while in the sustained phase (a host or VM
  // descheduled, the path stalled): the slope would read a slower rate than
  // the shaper's. Not found; the stream is worth sending again.
  bool paused = false;
  // The sustained phase came at the rate we sent it (our sending slowed: a
  // busy host; the replies only show that): not a shaper.
  bool sender_limited = false;
  double pause_s = 0;             // the longest such stall, beyond the expected spacing
  int steps_removed = 0;          // steps taken out of the reply curve (ShaperOptions::min_step)
  // Our own sending stood still early in the stream (ShaperOptions::
  // min_send_stall): a bucket not yet empty refilled in mid-stream, and a
  // stream that showed none says little. Bits (after the head) where it
  // began; 0: none.
  double send_stall_bits = 0;
  std::string reason;             // why not found (diagnostics)
};

// `points` in send order, the head marker first (bits 0). `offered_bps`: the
// rate the stream was sent at (0 = unknown).
ShaperFinding detect_shaper(const std::vector<ShaperPoint>& points, double offered_bps,
                            const ShaperOptions& opt = {});

// How long after the head a bucket of `bucket_bytes` with sustained rate
// `rate_bps` empties under a stream offered at `offered_bps` (seconds of
// sending; infinite if offered <= rate).
double shaper_drain_time_s(double bucket_bytes, double rate_bps, double offered_bps);

}  // namespace lw

namespace lw {

// When the capacity trains call for the shaper probe (cheap tests on what
// they measured anyway; a false alarm costs one stream, never a result).
//
// The sizing trains are short and fit in a bucket; a later, longer train that
// came back clearly slower (by min_shift) has met the sustained rate.
bool rate_drop_suggests_bucket(double sizing_bps, double later_bps, double min_shift = 1.5);
// The two-length slope's fixed offset: a bucket lets B bytes of every train
// through at the peak, so D = (bits - B)/R: an offset of -B/R. Only an offset
// worth at least `min_bucket_bytes` at the estimated capacity, beyond a few
// packets' time, counts (a host that wakes late for the head reply also makes
// it negative, by far less).
bool offset_suggests_bucket(double offset_s, double capacity_bps, int packet_size,
                            double min_bucket_bytes = 8000);
// Lost marker replies (`replies_lost`). A bucket or a queue that a train
// overruns takes what comes after the load: the tail's reply. The warm-up
// SYN, sent alone ahead of the train, and the head, after two drain packets
// on a link the idle between trains has emptied, come back. A lossy wire
// (radio, a bad cable, a congested switch port), on the way out or back,
// takes any reply alike: with a warm-up and two markers it takes the warm-up's
// or the head's reply twice as often as the tail's alone. `early`: trains
// that lost the warm-up's or the head's reply and none after (a lost warm-up
// reply alone too: the train still measured); `later`: trains that lost
// later replies (with the head's too: a queue still full from the train
// before); `recent`: of the last four trains, those that lost later replies. A bucket overrun takes the tail of every train as long
// (every other one, with two lengths) until the probe runs; a lossy wire
// takes one now and then. So a bucket when at least two of the last four
// trains lost later replies, and at least twice as many trains lost later
// replies as early ones. (Random loss of 3% before a 50 Mbit/s link, lab:
// with "two trains lost replies" every run sent shaper streams of 1.3 and
// 5.1 MB over 8 s, read `shaper_not_emptied` and measured for 16 s where 5 s
// did without loss; with the early losses alone counted against it, 2 runs
// of 3 still did.) A bucket the trains overrun only now and then is the
// routine check's to find.
bool lost_replies_suggest_bucket(int later, int early, int recent);

// The avail-bw of a token bucket's sustained regime from its refill
// (`measure`): one stream empties the bucket (its tail's reply marks the
// moment the shaper's queue ran dry), an idle of tau seconds, then a stream
// whose finding gives the bucket's content at its head. Tokens accrue at the
// sustained rate R and every other flow through the shaper spends them at its
// rate X, so the content is (R - X)·tau: the unused part of the sustained
// rate, averaged over tau. The content is R times the head's lead on the
// sustained line (f.bucket_bytes / f.rate_bps), which holds also when the
// cross traffic took a share of the stream's sustained phase.
//
// `tail_wait_s`: how long the emptying stream's tail waited in the shaper's
// queue (D). The other flows' packets that arrived meanwhile are still queued
// behind it and leave on the refill's first tokens: the content is
// A·tau - (R - A)·D, so A = (content + R·D) / (tau + D). The pair is unusable
// when D exceeds tau (the correction would dominate).
struct RefillSample {
  bool ok = false;
  bool saturated = false;     // the bucket was (nearly) full again: tau too long
  double content_bytes = 0;   // the bucket's content at the head
  double availbw_bps = 0;     // 8·content / tau, at most R
  double upper_bps = 0;       // when no burst was seen (content under the detector's floor): the bound
};
RefillSample refill_sample(const ShaperFinding& f, double rate_bps, double bucket_bytes,
                           double tau_s, const ShaperOptions& opt = {},
                           double tail_wait_s = 0);

// Whether a refill pair read tokens its emptying stream left (the bucket held
// more than the pair was sized for): the reading stream found more than the
// refill could bring in tau (R·tau), or the emptying stream's tail, sent
// `excess_bytes` past the bucket at `peak_bps`, did not wait in the shaper's
// queue 30% of the 8·excess·(1 - R/P)/R it then would have.
bool refill_left_tokens(const RefillSample& s, double rate_bps, double peak_bps, double tau_s,
                        double tail_wait_s, double excess_bytes, double packet_bytes);

// Whether a refill pair contradicts the bucket it was sized for: its
// emptying stream did not empty it (`not_emptied`: refill_left_tokens), its
// reading stream found the bucket of `bucket_bytes` (nearly) full after an
// idle `tau_s` in which R could not have refilled two thirds of it
// (`s.saturated` with R·tau < 2/3 B: the refill ran at over 1.2·R, R is too
// low; with the idle's 5 ms floor past the whole refill, as for 30 KB at 100
// Mbit/s (2.4 ms), a full bucket is what the bucket does: the bucket
// benchmark at bfc2fe9 refuted that one in 3 of 3 runs and the capacity went
// back to the burst's trains, +118..+157%), or came back as one line well
// above the sustained rate (`read`: no shift, at least 1.2·R over enough
// replies: the path carries more than that). A token bucket is a mechanism:
// its refill shows on every pair sized from its rate and depth. A level shift
// that cross traffic made in the shaper streams (an on/off source, a TCP
// flow's windows: the random-path benchmark's paths 7 and 38 at 86b52ad, a
// "bucket" of 22-28 KB whose refill no pair ever read) shows none.
bool refill_contradicts_bucket(const RefillSample& s, const ShaperFinding& read, double rate_bps,
                               double bucket_bytes, double tau_s, bool not_emptied,
                               const ShaperOptions& opt = {});

// Whether a bucket whose emptying stream a refill pair could not empty may
// be larger than the streams found (they began on a part-full bucket), so
// that the pair is no contradiction while the pairs can still grow: the
// streams' burst came at `peak_bps` >= 3 x the sustained `rate_bps`. A false
// bucket (cross traffic that took a share u of the link during the streams)
// bursts at the link's own rate, R / (1 - u), under 3 R up to u = 2/3 (the
// random-path benchmark's paths 7 and 38 at 86b52ad: 2.1 R and about 1.5 R);
// a real one at our line rate or its peak rate (a 3 MB bucket at 20 Mbit/s,
// found part-full as 424 KB at 980 Mbit/s, was refuted by two such pairs:
// the bucket benchmark at 8443e53). Unknown peak: no.
bool bucket_may_be_larger(double peak_bps, double rate_bps);

// How large a bucket the capacity trains that came back fast suggest: the
// bytes they put through it (`fast_bytes`, every such train's) less what the
// bucket refilled at `slow_bps` over the `span_s` from the first of them to
// the train that came back slow, and never less than the largest of them
// (which passed whole; 0 = not known: the sum). Without a slow rate (0: the
// replies stopped), the sum.
// The sum alone counts every refill between trains as bucket: on the lab's
// 100 Mbit/s link with a 3 MB bucket the trains put 14 MB through it and the
// shaper probe's first stream ran 28 MB of a 50 MB byte cap.
double bucket_hint_bytes(double fast_bytes, double largest_fast_bytes, double span_s,
                         double slow_bps);

// Whether a shift a stream showed (`shift_bytes` into it, the rate falling to
// `rate_bps` after it) is refuted by an earlier stream of the same probe that
// came back whole: `whole_bytes` long, at `whole_bps`. A bucket that emptied
// that early, at a sustained rate well below the whole stream's, would have
// shown in it (a bucket refilled only in part empties sooner, not later).
// The unshaped lab path at 1 Gbit/s: a 4.1 MB stream whole at 971 Mbit/s,
// then a 10.2 MB one whose tail's replies were lost "shifted" to 641 Mbit/s
// 364 KB in; the follow-up stream it asked for ended the probe on a weaker
// verdict than the first stream's (a bucket of at least 581 KB, not 4.1 MB).
bool shift_refuted_by_whole_stream(double shift_bytes, double rate_bps, double whole_bytes,
                                   double whole_bps);

}  // namespace lw
