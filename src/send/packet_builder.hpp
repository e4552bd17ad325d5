#pragma once
// Turns a Probe into wire bytes with libnet (construction only: libnet's
// LIBNET_NONE mode needs no privileges, so --dry-run and the tests use it too).
#include <cstdint>
#include <vector>

#include "plan/probe.hpp"

struct libnet_context;

namespace lw {

class PacketBuilder {
 public:
  PacketBuilder();
  ~PacketBuilder();
  PacketBuilder(const PacketBuilder&) = delete;
  PacketBuilder& operator=(const PacketBuilder&) = delete;

  // IPv4 + TCP with DF set, or IPv6 (flow label p.flow_label, hop limit p.ttl)
  // + TCP; RSTs carry the probe signature (padded) as payload.
  std::vector<std::uint8_t> build(const Probe& p);

 private:
  libnet_context* l_;
};

}  // namespace lw
