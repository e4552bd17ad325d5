#include "app/plumbing/own_counters.hpp"

#include <net/if.h>

#include <fstream>

#include "app/plumbing/own_qdisc.hpp"

namespace lw {

namespace {

bool read_number(const std::string& path, std::uint64_t& v) {
  std::ifstream f(path);
  return static_cast<bool>(f >> v);
}

}  // namespace

bool OwnCounters::read(std::uint64_t& bytes, std::uint64_t& packets) const {
  const std::string base = "/sys/class/net/" + ifname_ + "/statistics/";
  return read_number(base + "tx_bytes", bytes) && read_number(base + "tx_packets", packets);
}

bool OwnCounters::begin(const std::string& ifname) {
  on_ = false;
  capacity_ = 0;
  samples_.clear();
  last_ = 0;
  if (ifname.empty() || ifname.find('/') != std::string::npos) return false;
  ifname_ = ifname;
  // sysfs belongs to the network namespace it was mounted in: the same
  // ifindex as ours, or it is another interface of that name.
  std::uint64_t index = 0, type = 0;
  if (!read_number("/sys/class/net/" + ifname + "/ifindex", index) ||
      index != if_nametoindex(ifname.c_str())) {
    return false;
  }
  ifindex_ = static_cast<int>(index);
  // ARPHRD_ETHER (1): a 14-byte header counted with every packet; a tunnel
  // or a point-to-point device has none.
  l2_header_ = read_number("/sys/class/net/" + ifname + "/type", type) && type == 1 ? 14 : 0;
  std::uint64_t b = 0, p = 0;
  if (!read(b, p)) return false;
  on_ = true;
  return true;
}

double OwnCounters::availbw(int packet_size) const {
  if (!on_ || !(capacity_ > 0)) return 0;
  const OwnTraffic t = own_traffic(samples_, l2_header_);
  return t.valid ? link_availbw(capacity_, t.link_bps, packet_size, l2_header_) : 0;
}

void OwnCounters::sample(Nanos mono, std::uint64_t our_bytes, std::uint64_t our_packets,
                         bool force) {
  if (!on_ || (!force && last_ != 0 && mono - last_ < kOwnSampleEvery)) return;
  CounterSample s;
  if (!read(s.tx_bytes, s.tx_packets)) {
    on_ = false;
    return;
  }
  s.backlog_bytes = read_root_backlog(ifindex_);
  if (samples_.empty()) t0_ = mono;
  s.t_s = to_seconds(mono - t0_);
  s.our_bytes = our_bytes;
  s.our_packets = our_packets;
  samples_.push_back(s);
  last_ = mono;
}

}  // namespace lw
