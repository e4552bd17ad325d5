#pragma once
// Reads the transmit counters of the interface our probes leave by
// (/sys/class/net/IF/statistics, 64-bit), with what we had sent at that
// moment, for estimate/own_traffic. Sampled between trains by the phase's
// runner (LiveRunner::admit), at most every kOwnSampleEvery, in the sending
// thread: no lock, no thread of its own. Each sample also reads the root
// qdisc's backlog (app/own_qdisc, rtnetlink).
#include <cstdint>
#include <string>
#include <vector>

#include "estimate/own_traffic.hpp"
#include "linkwidth/time.hpp"

namespace lw {

constexpr Nanos kOwnSampleEvery = 100 * kMs;

class OwnCounters {
 public:
  // Starts sampling `ifname`; false (and no sampling) when its counters
  // cannot be read, or sysfs shows another network namespace's interface
  // (its ifindex is not ours).
  bool begin(const std::string& ifname);
  // A sample, unless one was taken less than kOwnSampleEvery ago (`force`:
  // regardless).
  void sample(Nanos mono, std::uint64_t our_bytes, std::uint64_t our_packets, bool force = false);
  void end() { on_ = false; }
  // The link's IP-layer capacity from its root shaper (estimate/own_qdisc),
  // for packets of the phase's size; 0: not known.
  void set_capacity(double ip_bps) { capacity_ = ip_bps; }
  // The link's avail-bw for packets of `packet_size` IP bytes over the
  // samples so far (estimate/own_traffic: link_availbw); 0 when its
  // capacity is not known or the samples do not yet span a window.
  double availbw(int packet_size) const;
  bool on() const { return on_; }
  const std::string& interface() const { return ifname_; }
  int l2_header() const { return l2_header_; }
  const std::vector<CounterSample>& samples() const { return samples_; }

 private:
  bool read(std::uint64_t& bytes, std::uint64_t& packets) const;
  bool on_ = false;
  std::string ifname_;
  int ifindex_ = 0;
  int l2_header_ = 14;
  double capacity_ = 0;
  Nanos last_ = 0;
  Nanos t0_ = 0;
  std::vector<CounterSample> samples_;
};

}  // namespace lw
