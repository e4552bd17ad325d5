#pragma once
// The average probing rate cap (--max-load, default 10% of the capacity):
// pathload's non-intrusiveness rule (SLoPS §IV: the average probing rate stays
// under 10% of the path's capacity), applied to every phase.
//
// Two rules, both budgeted with a rate that our own lost or compressed load
// cannot inflate:
//
//   1. the idle after each train (the phase's own rule, e.g. train time at C
//      / max_load) uses budget_capacity(), not the estimate alone;
//   2. the gate before each train: whatever the per-train rules allowed,
//      the bytes really sent since the start, over the time elapsed, stay
//      under max_load x budget_capacity() (load_ready_at()). It counts every
//      byte (discovery, reply checks, load-check SYNs) and re-prices what was
//      sent earlier when the budget rate falls later.
//
// Why a separate budget rate: a per-train rate (bits after the head marker /
// reply dispersion) can only be too HIGH from our own load: load lost in a
// small queue still counts in the bits but not in the dispersion (a 15 KB
// queue at 20 Mbit/s: trains of 18 load packets came back with the
// dispersion of trains of 9 and read 39.5 Mbit/s), a delayed head reply
// compresses the train, a token-bucket burst lets its first bits through at
// line rate. Cross traffic only makes a train look slower. A two-length slope
// built from such trains can read gigabits. So the lower quartile of the
// per-train rates, and never more than the estimate, is what idle is budgeted
// with, lowered further when long trains read faster than short ones (the
// mark of lost load); with nothing measured yet the first train goes
// (nothing is known before it), and after trains that showed no rate at all,
// kUnknownPathBps.
//
//   std::vector<double> rates;                      // every train's bits/dispersion
//   const double cb = budget_capacity(rates, est.valid ? est.capacity_bps : 0,
//                                     load_loss_factor(short_rates, long_rates));
//   Nanos t = load_ready_at(t0, bytes_sent_since_t0, next_train_bytes, cb, max_load);
//   sleep until max(t, the phase's own next start)
//
// Pure: no clocks, no sockets.
#include <cstdint>
#include <vector>

#include "linkwidth/time.hpp"

namespace lw {

// The rate assumed for a path that showed none (every reply lost): 1 Mbit/s,
// below any path this tool measures usefully, so the idle errs long.
constexpr double kUnknownPathBps = 1e6;

// The capacity to budget idle time with: the lower quartile (nearest rank,
// so the minimum up to 4 samples) of the per-train rates `train_rates_bps`
// (zero and non-finite entries ignored), and at most `estimate_bps` when that
// is > 0, divided by `loss_factor` (>= 1, see load_loss_factor). Only the
// estimate: it. Neither: kUnknownPathBps.
double budget_capacity(const std::vector<double>& train_rates_bps, double estimate_bps,
                       double loss_factor = 1.0);

// The budget rate of a phase that comes after a finished capacity estimate
// (the avail-bw phase of `measure`): that estimate's 95% lower bound
// `low_bps` (at most `capacity_bps`) where it is `trusted`, else the budget
// the earlier phases used (`earlier_bps`, returned as it is; 0: none).
// Never below `earlier_bps`. The lower quartile of the capacity trains
// guards their own phase against trains that read high (above); by the end
// of that phase the estimate has been checked (two lengths, the reply gaps,
// the load check) and cross traffic, which only slows trains, no longer
// lowers the budget: on loaded paths the quartile sat at 0.5-0.9 x C while
// the estimate's lower bound sat at 0.99 x C, and the avail-bw phase, bound
// by --max-load, took up to twice its time (the random-path benchmark at
// 752207d, issue 11). Not trusted: a lower bound (we could not send faster),
// or load lost unseen (the estimate may still read high).
double after_capacity_budget(double earlier_bps, double capacity_bps, double low_bps,
                             bool trusted);

// The mark of lost load, from the per-train rates of kept short and long
// trains (two lengths): a queue holds about the same bytes of any train, so
// lost load grows with the length and long trains read faster than short
// ones. Without loss they read alike (a fixed dispersion offset makes them
// differ by a few %). When the long ones' median is more than 1.1 x the short
// ones' (the tally's load_loss_suspected rule), the short trains may have
// lost load too, and nothing the trains show tells how much: assume as much,
// relative to the truth, as the long ones relative to them. Returns that
// ratio, else 1 (also with fewer than 2 trains of either length). On the lab's
// 15 KB queue, where short trains lose nothing, this halves the budget (5% of
// C instead of 10%); where every train loses load it is what keeps the rate
// under the cap at all. At most `length_ratio` when that is over 1: a queue
// of Q packets passes Q of a train of any length, so lost load makes a train
// r times as long read at most r times as fast (exactly r where both lengths
// lose). More than that is cross traffic that slowed the short trains (the
// random-path benchmark with seed 2034 at 9ad4182, path 20: long trains 4.96
// times as fast behind TCP bursts on a 19.1 Mbit/s link, the budget 0.7
// Mbit/s for a path of 18.9, and the time cap ended the phase after 5
// trains).
double load_loss_factor(const std::vector<double>& short_rates_bps,
                        const std::vector<double>& long_rates_bps, double length_ratio = 0);

// Earliest time a train of `next_bytes` may start so that everything sent
// since `t0` (`sent_bytes`, not counting this train) plus this train, over the
// time until this train has crossed a link of `capacity_bps`, averages at most
// max_load x capacity_bps:
//     8 (sent + next) / (t + 8 next / C - t0) <= max_load C
// `capacity_bps` <= 0 means nothing is known yet: no bound (returns t0).
Nanos load_ready_at(Nanos t0, std::uint64_t sent_bytes, std::uint64_t next_bytes,
                    double capacity_bps, double max_load);

// Average probing rate of `bytes` over [t0, t] in bit/s (0 if t <= t0).
double average_rate_bps(Nanos t0, Nanos t, std::uint64_t bytes);

// The account the gate reads in a phase: what was sent since t0 (the
// sender's byte count less bytes0) over the time since, held under
// max_load x capacity_bps.
struct LoadLedger {
  Nanos t0 = 0;              // when the phase began, moved on by excluded spans
  std::uint64_t bytes0 = 0;  // bytes not counted: before the phase, and excluded spans'
  double capacity_bps = 0;   // the conservative capacity; 0 = nothing measured yet
};

// Leaves out of the ledger a span of `span` during which `bytes` were sent
// under their own caps (the shaper probe's streams and the idle before
// them: plan/shaper_plan.hpp, app/shaper_run.cpp). Its bytes do not make
// later trains wait, and its time gives them no credit either: the trains'
// bytes over the time outside such spans stay under max_load x capacity.
void exclude_from_ledger(LoadLedger& l, Nanos span, std::uint64_t bytes);

// load_ready_at() on a ledger, the sender having sent `bytes_now` in all.
Nanos ledger_ready_at(const LoadLedger& l, std::uint64_t bytes_now, std::uint64_t next_bytes,
                      double max_load);

}  // namespace lw
