#pragma once
// The capacity measurement: discovery, automatic train sizing, trains until the
// interval is tight enough or a cap is reached, idle time that keeps the
// average probing rate under --max-load of the capacity.
#include <atomic>
#include <functional>

#include "app/runs/capacity_tally.hpp"
#include "app/plumbing/config.hpp"
#include "app/plumbing/options.hpp"  // params_json
#include "app/plumbing/runner.hpp"
#include "app/runs/shaper_run.hpp"
#include "estimate/middlebox.hpp"
#include "linkwidth/ip_addr.hpp"
#include "linkwidth/time.hpp"
#include "nlohmann/json.hpp"
#include "report/result.hpp"

namespace lw {

// Throws lw::Error on setup failures (privileges, filtered target, ...).
// On interruption returns what it has, with stop_reason "interrupted".
CapacityResult run_capacity(const Config& c, const std::atomic<bool>& stop);

// The capacity measurement on an open session (used by `measure`), ending
// by t_cap (CLOCK_MONOTONIC) at the latest.
struct Session;
CapacityResult run_capacity_phase(Session& s, const Config& c, const std::atomic<bool>& stop,
                                  Nanos t_cap);

// The trains of the capacity phase, live or replayed: automatic sizing,
// trains until the interval is tight enough, a cap stops it or the runner
// says stop (res.stop_reason), idle under --max-load. Fills res.trains; the
// caller draws the estimate (tally.finish) after setting the stop reason.
struct CapacityTrains {
  CapacityTrains(bool two_lengths, bool verbose, double precision)
      : tally(two_lengths, verbose, precision) {}
  CapacityTally tally;
  std::vector<ReplyStamp> stamps;  // TTL and IP ID of every marker reply
  int packet_size = 0;             // L at the end (a path-MTU shrink lowers it)
  // The shaper probe, if the trains called for it (app/shaper_run.hpp).
  ShaperHints shaper_hints;
  ShaperRecord shaper;
  bool shaper_tried = false;
};
// Runs the shaper probe when the trains call for it (live: the streams;
// replay: the recorded finding). Null: never.
using ShaperProbe = std::function<ShaperRecord(const ShaperHints&)>;
CapacityTrains capacity_trains(ProbeRunner& runner, const Config& c, PhasePath& path,
                               CapacityResult& res, const ShaperProbe& shaper_probe = nullptr);

// The checks after a capacity estimate (reply limits, replies_mixed, the
// dropped-load check with its SYN trains) are not re-run by `linkwidth
// analyze`: the live run notes what they changed (warnings removed and added,
// the load check, a replaced capacity) and analyze applies the same change.
nlohmann::json capacity_checks_note(const std::vector<Warning>& before,
                                    const CapacityResult& after);
void apply_capacity_checks(CapacityResult& res, const nlohmann::json& note);

// The capacity interval's floor: at least +-kSystematicRel of the estimate.
// The trains' and the gaps' intervals count only how the samples spread, not
// what biases them all alike: the 40-byte markers inside the trains' bits
// (a link also counts their link-layer header), the shapers' timer and rate
// granularity, the clock. Against the lab's configured rates those read
// -0.3..+0.1% (trains) and up to +0.7% (gaps) with intervals as narrow as
// +-0.05% (the paths benchmark at b93126c: 7 of 60 intervals missed the
// truth by 0.01-0.3%). Live and in `linkwidth analyze`, after the checks.
// It was 0.3% until seed 2032's path 37 (an idle 160.2 Mbit/s tbf of our
// own, every train 0.3-0.7% under it, the estimate -0.43%): over the 480
// documents of the committed random-path runs, 47 intervals missed the
// truth at 0.3%, 40 at 0.5% (the 7: estimates 0.3-0.5% off), 39 at 0.6%.
constexpr double kSystematicRel = 0.005;
void add_systematic_margin(CapacityResult& res);

// Our interface's root shaper (estimate/own_qdisc.hpp), as a capacity: how
// far under its configured rate a shaper may run (the lab's tbf and htb:
// within 0.1%), and how far over the rate read back it may be configured: the
// kernel keeps whole bytes per second, so the rate read is up to 7 bit/s
// under the one given (the benchmark at 718edb8: htb 5451914 read back as
// 5451912, and the interval's upper end missed the truth by 2 bit/s on 4
// paths).
constexpr double kOwnShaperSlack = 0.01;
constexpr double kOwnShaperRounding = 0.001;
struct OwnShaper {
  std::string interface;
  std::string kind;       // tbf / htb
  double rate_bps = 0;    // as configured: counted bytes per second x 8
  double ip_bps = 0;      // the IP-layer capacity it leaves packets of the phase's size
};
// The capacity becomes the shaper's IP-layer rate (capacity_source
// own_shaper, warning capacity_from_own_shaper saying `why`, interval
// [1 - kOwnShaperSlack, 1 + kOwnShaperRounding] x it, not a lower bound).
void take_own_shaper_capacity(CapacityResult& res, double ip_bps, const std::string& why);
// The capacity read above the shaper's IP-layer rate: every packet of ours
// passes it, so that rate is the path's capacity (a token bucket lets a
// train or a back-to-back pair out at line rate while its tokens last, and
// the trains or the reply gaps read its bursts). `spread_leaving`: the
// trains were spread to their rate as they left our interface
// (local_bottleneck), for the message. True when it applied.
bool cap_at_own_shaper(CapacityResult& res, const OwnShaper& own, bool spread_leaving);

// A capacity train of `n` load packets of `packet_size` bytes: markers and
// drain packets from `c`, back to back or spaced to --max-rate.
CapacityTrainParams train_params(const Config& c, const FlowId& flow, int n, int packet_size);

}  // namespace lw
