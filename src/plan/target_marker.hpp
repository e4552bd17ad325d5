#pragma once
// How the markers addressed to the target draw its replies (README, "Open-port
// markers"). Every train is planned with closed-port SYN markers; the plan
// functions rewrite it for the flow's kind at the end (apply_target_marker),
// so every phase works with any kind.
//
//   kClosedSyn  SYN to a closed port -> RST/ACK, ack = seq + 1 + payload
//               (LinkWidth §3.3). Nothing else is sent.
//   kOpenSyn    SYN to a listening port -> SYN/ACK, ack = seq + 1. Each SYN is
//               followed by a closer: an RST with seq = ISN + 1 in the same
//               4-tuple. Linux's tcp_check_req() finds the request socket the
//               SYN made, takes the RST as in window (seq == rcv_nxt) and drops
//               the request without a reply ("embryonic reset"); so the target
//               keeps no half-open connection, and the next SYN of the flow
//               meets none (a SYN that meets one draws only an ACK, at most one
//               per net.ipv4.tcp_invalid_ratelimit). The closer is the first RST
//               of the train after the SYN (a load or drain packet, which then
//               carries seq = ISN + 1) or, when another SYN to the target comes
//               first or none follows, a small RST inserted right after it.
//               RSTs that match no request (the load) reach the listening socket,
//               which drops them silently (tcp_rcv_state_process, TCP_LISTEN).
//   kAck        bare ACK (any port; needs a host without a stateful firewall)
//               -> RST with seq = our ack number (RFC 793, "Reset Generation").
//               The ack number is the marker's tag, unique in the run. The
//               target keeps no state at all.
#include <cstdint>
#include <string>
#include <vector>

#include "plan/capacity_plan.hpp"
#include "plan/probe.hpp"

namespace lw {

// The kinds' names: name(TargetMarker) and from_name (linkwidth/run_names.hpp).

// IP bytes of an inserted closer: 20 bytes of the probe signature, so that it
// is told apart from the prober kernel's own 40-byte RSTs (which answer every
// SYN/ACK: the kernel has no socket for our flow).
constexpr std::uint16_t kCloserBytes = 60;

// SYNs addressed to other hosts than the target (hops: routers' own
// addresses) leave the target's port when it is not a closed one: the flow's
// port then listens on the target and may listen on a router too.
constexpr std::uint16_t kRouterMarkerPort = 47391;

// Rewrites `t` (planned with closed-port SYN markers) for kind `k`; SYNs with
// TTL < `min_ttl` are left alone (TTL-limited markers of the hops train expire
// at routers). kAck: each SYN to `target` becomes a bare ACK with
// ack = seqs.next(). kOpenSyn and kAck: SYNs to other hosts go to
// kRouterMarkerPort; every SYN left (to the target with kOpenSyn, to the
// routers with both) gets a closer as above; an inserted closer leaves
// `closer_delay` after its SYN (never after the next probe) with full TTL.
// Train::markers and a non-empty Train::bits_from_head are kept consistent
// (bits count every probe after the head up to marker k, closers included).
// Returns, for every old probe index, its new index.
std::vector<int> apply_target_marker(Train& t, TargetMarker k, const IpAddr& target,
                                     std::uint8_t min_ttl, Nanos closer_delay,
                                     SeqAllocator& seqs);

// Discovery's probes, `spacing` apart, all from flow.sport to flow.dst: per
// (port, kind) a SYN (kClosedSyn, kOpenSyn), always followed by a closer, as
// any candidate may turn out to listen; or a bare ACK (kAck). Markers: the
// SYNs and ACKs, in the order given.
Train make_port_probes(const FlowId& flow,
                       const std::vector<std::pair<std::uint16_t, TargetMarker>>& probes,
                       Nanos spacing, int train_id, SeqAllocator& seqs);

// The same for a train built for `flow` (flow.marker, flow.dst).
inline std::vector<int> apply_target_marker(Train& t, const FlowId& flow, SeqAllocator& seqs,
                                            std::uint8_t min_ttl = 1, Nanos closer_delay = 0) {
  return apply_target_marker(t, flow.marker, flow.dst, min_ttl, closer_delay, seqs);
}

}  // namespace lw
