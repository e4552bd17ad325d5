#pragma once
// The shaper probe on an open session (estimate/shaper.hpp, plan/shaper_plan.hpp):
// after the capacity trains disagreed the way a token bucket makes them, one
// rate-constant stream of RST load with SYN markers, long enough to empty the
// bucket; a longer one (x4) if the first came back at the rate it was sent
// (the bucket was larger), within --max-bytes and the time cap. Each stream
// starts after an idle that lets the bucket refill and the queue drain.
#include <atomic>
#include <optional>
#include <string>

#include "app/plumbing/config.hpp"
#include "app/plumbing/run_notes.hpp"
#include "estimate/policer.hpp"
#include "estimate/shaper.hpp"
#include "linkwidth/time.hpp"
#include "nlohmann/json.hpp"
#include "report/result.hpp"

namespace lw {

struct Session;

// What the capacity trains showed.
struct ShaperHints {
  std::string trigger;      // rate_drop, negative_offset, replies_stopped
  double fast_bps = 0;      // rate of the (short) trains that fit the bucket
  double slow_bps = 0;      // rate of the slow train, or the estimate (0: unknown)
  double fast_bytes = 0;    // bytes of the trains that came back fast (all of them)
  double largest_fast_bytes = 0;  // the largest of those trains (0: as fast_bytes)
  double fast_span_s = 0;   // from the first of them to the trigger (bucket_hint_bytes)
  double queued_bytes = 0;  // bytes of the last train, possibly still queued
  // A stream that came back whole at our rate is followed by one `growth`
  // times longer, `growths` times at most (and within the stream count and the
  // caps). After capacity_lower_bound once: a fast path, most likely without
  // a bucket, but a 3 MB bucket at 20 Mbit/s under cross traffic kept the
  // trains (288 KB at most) in its burst, the one 2.6 MB stream passed whole,
  // and the avail-bw search read the burst, 30x the sustained rate's.
  // (2.5 times longer after capacity_lower_bound: enough for the 3 MB
  // buckets of issue 13's grid, and 6.5 MB, not 10, on a gigabit path
  // without one.)
  int growths = 3;
  double growth = 4;
  // The routine check (trigger "routine", nothing in the trains showed a
  // bucket): the first stream's bytes and the rate it is paced at (0: as
  // the hints above size it, sent back to back or at --max-rate).
  double stream_bytes = 0;
  double pace_bps = 0;
  int markers = 0;  // the first stream's markers (0: kShaperMarkers)
};

// Whether a stream said only that it stayed inside any bucket there is (and
// is worth a longer one): it came back at the rate we sent it, or as one
// line about as fast as the trains that fit the bucket (within 0.8-1.25 of
// the fastest; any rate from 0.8 up after capacity_lower_bound, where those
// trains read our own sending).
bool stream_passed_whole(const ShaperFinding& f, const ShaperHints& h);

// The routine check's stream (ShaperHints::stream_bytes) unless
// --shaper-stream sets it: a tenth of a second at the trains' rate, 64 KB to
// 1 MB.
double routine_stream_bytes(double capacity_bps);

// Its markers: a quarter second's worth of the replies we may ask of the
// target per second (--max-replies, lowered when the target limits them), at
// most 24; 0, no routine check, under 12 (too few to show a bucket) or when
// the target answers fewer than that at once (ReplyGovernor::max_burst).
int routine_markers(double replies_per_s, int max_burst);

// Sends the streams and reads them. Sends nothing once `stop` is set or
// past t_cap.
ShaperRecord run_shaper_probe(Session& s, const Config& c, const std::atomic<bool>& stop,
                              Nanos t_cap, const ShaperHints& hints);

// Puts the probe's record into the result: when a bucket was found, the
// capacity becomes its sustained rate (capacity_source "shaper_stream") and
// the warning `token_bucket` says so; `shaper_not_emptied` when every stream
// came back at the rate it was sent.
void apply_shaper(const ShaperRecord& rec, CapacityResult& res);

// ShaperRecord::verdict when the refill pairs refuted the bucket
// (run_shaper_availbw, estimate/shaper.hpp refill_contradicts_bucket).
inline constexpr const char* kShaperRefutedVerdict = "refuted";

// Undoes apply_shaper after the refill refuted the bucket: the capacity the
// trains and the checks had (CapacityResult::before_shaper), its warnings,
// `shaper_refuted` saying what the streams had claimed; the record keeps the
// streams' and the refill's counts, verdict "refuted", no bucket. False (and
// nothing changed) without a snapshot. `refill_pairs`: the pairs that refuted
// it (for the warning).
bool unapply_shaper(CapacityResult& res, int refill_pairs);

// The avail-bw search that ran after a refuted refill, with the refill's
// pairs, time, bytes and trains in it (they are the phase's too).
void merge_refill(AvailbwResult& search, const AvailbwResult& refill);

// The policer probe, after capacity trains that all came back at our own
// rate (a lower bound): one stream (plan/policer_plan.hpp) of RST load,
// `load_bytes` of it (within --max-bytes and 100-8000 packets) at --max-rate
// with full-size SYN markers among it, then a chirp of full-size SYN markers
// down to 1/256 of that rate; estimate/policer.hpp reads it. It waits for
// the --max-load ledger (its bytes count there) and the reply budget, and
// sends nothing past t_cap; a second one, 2.5 times the load, when every
// marker of the first passed (a bucket larger than it). apply_policer puts
// the record into res.policer; a policer found makes its rate the capacity
// (capacity_source "policer", warning `policer`; the avail-bw search does not
// run: its paced trains would pass inside the bucket, refilled between them,
// and read our own rate).
struct PolicerProbe {
  bool ran = false;        // a stream was sent
  nlohmann::json record;   // CapacityResult::policer
  PolicerFinding finding;
};
PolicerProbe run_policer_probe(Session& s, const Config& c, const std::atomic<bool>& stop,
                               Nanos t_cap, double load_bytes);
void apply_policer(const PolicerProbe& p, CapacityResult& res);

// `measure`/`availbw` on a path where the capacity phase found a bucket: the
// avail-bw of the sustained regime, from the bucket's refill (estimate/
// shaper.hpp, refill_sample): pairs of an emptying stream and, an idle tau
// later, a stream that reads the bucket's content; (R - X)·tau. The search's
// paced trains would each ride a refilled bucket and read up to R whatever
// the cross traffic. Within --max-bytes, the time cap and --max-load (the
// idle after a pair keeps its bytes under max_load of R). Updates the refill
// fields of `rec`; notes the result for `linkwidth analyze`.
AvailbwResult run_shaper_availbw(Session& s, const Config& c, const std::atomic<bool>& stop,
                                 ShaperRecord& rec, Nanos t_cap);

// `linkwidth analyze`: the live run's refill result from its end note (the
// streams are not replayed, as the shaper probe's are not).
// `end` is null when the file ends before the phase did.
AvailbwResult shaper_availbw_from_note(const std::optional<AvailbwEndNote>& end,
                                       ShaperRecord& rec);

}  // namespace lw
