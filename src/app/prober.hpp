#pragma once
// Wires send -> capture -> match for one train at a time. Owns the raw socket,
// the capture and the packet builder for a run; counts what it sent.
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "app/net.hpp"
#include "capture/live_capture.hpp"
#include "match/match.hpp"
#include "plan/probe.hpp"
#include "send/packet_builder.hpp"
#include "send/pacer.hpp"
#include "send/raw_socket.hpp"

namespace lw {

struct TrainRun {
  std::vector<SendRecord> sent;
  TrainOutcome outcome;
  Nanos start_mono = 0;  // when the pacer started
  Nanos end_mono = 0;    // when we stopped waiting for replies
};

class Prober {
 public:
  // `any_peer`: capture our port's TCP with every host, not only the target
  // (markers addressed to routers on the path draw RST/ACKs from them).
  Prober(const Route& route, std::uint32_t target, std::uint16_t sport,
         const std::atomic<bool>& stop, bool any_peer = false);

  // Sends the train on its schedule and waits until every probe in `wait_for`
  // (with `any`: one of them) has a reply, or `reply_timeout` has passed since
  // the last send. For `busy_wait` after the last send it polls the capture
  // without sleeping.
  TrainRun run(const Train& train, const std::vector<int>& wait_for, Nanos reply_timeout,
               bool any = false, Nanos busy_wait = 0);

  std::uint64_t packets_sent() const { return packets_; }
  std::uint64_t bytes_sent() const { return bytes_; }
  CaptureStats capture_stats() { return capture_.stats(); }
  std::uint32_t self() const { return route_.source; }

 private:
  Route route_;
  std::uint32_t target_;
  const std::atomic<bool>& stop_;
  RawSocket socket_;
  LiveCapture capture_;
  PacketBuilder builder_;
  Pacer pacer_;
  std::vector<Decoded> captured_;
  std::uint64_t packets_ = 0;
  std::uint64_t bytes_ = 0;
};

std::string capture_filter(std::uint32_t self, std::uint32_t target, std::uint16_t sport,
                           bool any_peer = false);

}  // namespace lw
