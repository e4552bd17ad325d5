#pragma once
// The hops measurement (issue 4; LinkWidth §3.2-3.3): closed-port discovery,
// path discovery with TTL-limited SYNs in the train's own 5-tuple, a check of
// which routers answer TCP on their own address, then recursive trains paced
// by each router's ICMP budget and --max-load, and the per-hop estimate.
#include <atomic>

#include "app/plumbing/config.hpp"
#include "linkwidth/ip_addr.hpp"
#include "linkwidth/time.hpp"
#include "nlohmann/json.hpp"
#include "report/hops_result.hpp"

namespace lw {

// Throws lw::Error on setup failures (privileges, filtered target, path longer
// than --max-hops). On interruption returns what it has ("interrupted").
HopsResult run_hops(const Config& c, const std::atomic<bool>& stop);

struct Session;
// The same on an open session (e.g. inside `measure`). The session's prober
// must capture every peer's TCP (open_session(..., any_peer = true)) for
// markers addressed to routers; without it those hops fall back to TTL markers.
HopsResult run_hops(Session& s, const Config& c, const std::atomic<bool>& stop);

// Names hop index k (0-based, into res.hops) the bottleneck: hop, address,
// rate, `confidence`, and the earliest hop the narrow link may end at (the
// unused hops right before it hide where the step happened).
void set_bottleneck(HopsResult& res, int k, double confidence);

// ---- Shared by the live run and `linkwidth analyze` (app/analyze.cpp) ----
class ProbeRunner;
struct PhasePath;
// Everything after the result's head (endpoints, params) is filled: path
// discovery, the router check, the recursive trains, the estimate. Sends and
// clock readings go through `io` (live: the prober; replay: the recording).
// ICMP errors per second a router sends us on this path (--icmp-rate, or the
// family's Linux default).
double icmp_rate_for(const Config& c, const IpAddr& dst);

HopsResult run_hops_on(ProbeRunner& io, HopsResult res, const Config& c, PhasePath& path,
                       const IpAddr& dst, Nanos t_begin);
// The configuration recorded with --save-pcap (config_json), read back and
// checked against the ranges the CLI allows for run_hops_on (exit-2 error).
Config hops_config_from(const nlohmann::json& j);


}  // namespace lw
