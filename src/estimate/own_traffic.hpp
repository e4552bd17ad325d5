#pragma once
// This host's own traffic through the interface our probes leave by, from
// the interface's transmit counters less our own probes. When that interface
// is the narrow link (an egress shaper: a shaped uplink, a container's or a
// VM's limit), the other traffic of this host shares its queue with our
// trains, and much of it is elastic: a TCP flow that meets our train in the
// qdisc backs off (TCP small queues hold its packets in the socket), so the
// trains find the link free and the search reads up to C (+15% to +49% in the
// issue 11 lab, +22% on the random-path benchmark's path 10: 5.5 Mbit/s with
// 1.2 of TCP from the same host, read 5.12 for 4.20). The counters see that
// traffic whatever its reaction to ours: the link's avail-bw is C less its
// share of the link. Pure functions over counter samples.
#include <cstdint>
#include <vector>

namespace lw {

// One reading: the interface's transmit counters (bytes include its link
// header) and what we had sent by then (IP bytes, packets), at t_s seconds,
// with the bytes queued in its root qdisc then (as the counters count them;
// -1: not read).
//
// The counters count what *left* the queue. Between two readings the other
// traffic that *arrived* is what left, plus what was queued at the second,
// less what was queued at the first: a queue our own earlier trains made
// this host's traffic build up drains at the link's rate (the lab's 50
// Mbit/s htb under 40 of this host's CBR: the first half second after the
// capacity phase read 49 of other traffic, an avail-bw of 0.6 for 9.9, and
// the whole phase's mean 8.7). Our own packets are counted as sent, so ours
// still queued at a reading count right too.
struct CounterSample {
  double t_s = 0;
  std::uint64_t tx_bytes = 0;
  std::uint64_t tx_packets = 0;
  std::uint64_t our_bytes = 0;
  std::uint64_t our_packets = 0;
  std::int64_t backlog_bytes = -1;
};

struct OwnTraffic {
  bool valid = false;
  double window_s = 0;
  // The other traffic's rate on the link, counted with its link header
  // (what it takes of a shaper that counts it: tbf and htb do).
  double link_bps = 0;
  // The lowest and highest such rate over bins of at least `bin_s`: how much
  // it varied while we measured (equal to link_bps with one bin).
  double low_bps = 0, high_bps = 0;
  int bins = 0;
};

// Needs two samples at least `min_window_s` apart; counters that ran
// backwards (an interface reset) make it invalid. Our own bytes are counted
// with `l2_header` bytes per packet (14 on Ethernet, 0 on a tunnel). A
// negative remainder (our packets our own qdisc dropped) counts as none.
OwnTraffic own_traffic(const std::vector<CounterSample>& s, int l2_header, double bin_s = 0.5,
                       double min_window_s = 0.2);

// The link's avail-bw for packets of `packet_size` IP bytes: C less the
// share of it the other traffic takes. C is an IP-layer rate of such
// packets (the link carries packet_size of every packet_size + l2_header
// bytes), so a rate X counted with headers takes X * packet_size /
// (packet_size + l2_header) of it. Never below 0.
double link_availbw(double capacity_bps, double other_link_bps, int packet_size, int l2_header);

}  // namespace lw
