#pragma once
// The available-bandwidth measurement (issue 3): paced trains of RST load
// between SYN markers at rates chosen by a search, with the narrow-link
// capacity as the upper end.
//   fleet      (default) fleets of K trains per rate, thresholds from the
//              path's own timing noise, a grey region, a response-curve fit
//              for the point estimate and the tight-link capacity;
//   linkwidth  the paper's TOPP binary search as published (§3.4-3.5.1).
#include <atomic>

#include "app/plumbing/config.hpp"
#include "linkwidth/time.hpp"
#include "nlohmann/json.hpp"
#include "report/measure_result.hpp"
#include "report/result.hpp"

namespace lw {

struct Session;

// Runs the search on an open session, ending by t_cap (CLOCK_MONOTONIC).
// `capacity_bps` is the upper end of the search.
AvailbwResult run_availbw_phase(Session& s, const Config& c, const std::atomic<bool>& stop,
                                double capacity_bps, Nanos t_cap);

// `availbw` and `measure`: capacity first (unless --capacity), then avail-bw.
MeasureResult run_measure(const Config& c, const std::atomic<bool>& stop);

// ---- Shared by the live run and `linkwidth analyze` (app/analyze.cpp) ----

class ProbeRunner;
struct PhasePath;
struct PacedSample;
struct Train;
struct TrainOutcome;

// The avail-bw search (fleet or linkwidth method) up to `capacity_bps`, its
// trains sent or replayed by `runner`, ending by t_cap. A calibration that
// fails twice ends it with stop_reason calibration_failed, as live.
void search_availbw(ProbeRunner& runner, PhasePath& path, const Config& c, double capacity_bps,
                    Nanos t_cap, AvailbwResult& res);
// One paced train's sample (counted in res.trains_sent).
// `own_link_availbw_bps`: ProbeRunner::own_link_availbw after the train.
PacedSample paced_train_sample(const Train& train, const TrainOutcome& outcome,
                               double own_link_availbw_bps, AvailbwResult& res);

// The configuration recorded with --save-pcap (config_json), read back and
// checked against the ranges the CLI allows for the search (exit-2 error).
Config availbw_config_from(const nlohmann::json& j);

// After the capacity phase of `measure`/`availbw`: false (the avail-bw
// result says why) if the search cannot run, else *capacity_bps is its upper end.
bool capacity_phase_done(MeasureResult& m, double* capacity_bps, bool with_hops = false);

// `measure`, after the hops phase: where the gap check shows the capacity
// trains (or adopted gaps) slowed by a loaded link after the narrow one (the
// gaps refused as too fast and the interval widened, gaps "agreeing" but over
// 5% above the trains, or adopted gaps whose interval reaches above them),
// the hop the narrow link ends at (estimate/hops.hpp, narrow_hop_above_trains)
// gives the capacity: capacity_source "hop_dispersion", warning
// capacity_from_hop, the bottleneck hop named there, *capacity_bps updated
// for the avail-bw search. Without the gaps, trains that went on from a hop
// to the target unslowed (narrow_hop_passed) do the same. Then, the capacity
// final, a bottleneck hop that reads far from it gives way to the hop that
// reads it (hop_at_capacity, warning bottleneck_at_capacity). The same live
// and in `linkwidth analyze`.
void narrow_capacity_from_hops(MeasureResult& m, double* capacity_bps);
// After the refill phase of a token bucket (shaper_run.hpp): when its pairs
// refuted the bucket (verdict "refuted"), the shaper is undone
// (unapply_shaper: the trains' capacity, warning shaper_refuted), the hops
// have their say on the capacity, and true: *capacity_bps is the upper end
// of the paced-train search that follows in the time left (its result then
// merged with the refill's: merge_refill). False when not refuted, or when
// the trains' capacity cannot bound a search (the refill's result says why).
// The same live and in `linkwidth analyze`.
bool refill_refuted(MeasureResult& m, AvailbwResult& refill, double* capacity_bps, bool with_hops);
// The avail-bw phase's configuration after the capacity phase. Where the
// capacity trains lost load unseen in a small queue (trains_shortened: the
// longest length that queue held, queue_fit_load_packets), the paced trains
// keep within kQueueFitShare times it plus the drain packets: a paced train
// piles up at most one packet in the tight link's queue per packet sent
// (cross traffic under that link's rate), so one of that length fills the
// queue in its second half at the earliest, and its markers still rise
// between the ratio's first one and the tail. A longer train fills it
// before the ratio's first marker: every marker from there waits the full
// queue, the ratio reads 1 however fast the train went (its load dropped
// unseen), and the search reads the capacity (the random-path benchmark
// with seed 2037, path 8: 79% CBR through a 12.7 KB queue at 9.7 Mbit/s,
// the calibration's noise lengthened the trains to 40 load packets, the
// queue held 8; trains at C read ratio 1.00 while their head-to-tail span
// read 1.15-1.19, and the estimate was +388%). Over the committed
// random-path runs up to 3f93c96 whose capacity phase shortened its trains
// (76), the avail-bw read a median |error| of 26.5% where its trains ran
// over twice that length (60) and 10.5% where they did not (16). Without a
// shortened capacity phase (or with --capacity) `c` as it is. The same live
// and in `linkwidth analyze`.
constexpr int kQueueFitShare = 2;
Config availbw_phase_config(const Config& c, const CapacityResult& cap);
// Where `phase` bounds the trains more than `c` did, the warning
// trains_shortened first among `a`'s (why, and the bound).
void note_trains_within_queue(const Config& c, const Config& phase, AvailbwResult& a);
// --capacity given: the capacity part of the result (its endpoints already set).
void given_capacity(MeasureResult& m, double capacity_bps);
// The avail-bw phase's result into the document, after the earlier warnings.
void add_availbw(MeasureResult& m, AvailbwResult a, unsigned capture_drops);

}  // namespace lw
