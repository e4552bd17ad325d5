#pragma once
// What the hops measurement needs from the world: send a train and collect
// its replies, the monotonic clock, waiting, the stop flag, the counters. The
// live implementation wraps the Prober and, with --save-pcap, notes every
// clock reading, train and stop it hands out; `linkwidth analyze` replays
// them (app/analyze.cpp), so run_hops_on() is the same code either way.
#include <atomic>
#include <cstdint>
#include <vector>

#include "app/prober.hpp"

namespace lw {

class TrainIo {
 public:
  virtual ~TrainIo() = default;
  virtual TrainRun run(const Train& train, const std::vector<int>& wait_for, Nanos reply_timeout,
                       bool any = false, Nanos busy_wait = 0) = 0;
  virtual Nanos now() = 0;                  // CLOCK_MONOTONIC
  virtual void wait_until(Nanos mono) = 0;  // or until stopped
  virtual bool stopped() = 0;
  virtual std::uint64_t bytes_sent() = 0;
  virtual std::uint64_t packets_sent() = 0;
  virtual unsigned capture_drops() = 0;
};

struct Session;
struct Config;

class LiveTrainIo : public TrainIo {
 public:
  // With a session, trains go through its reply budget and reply checks
  // (session.hpp, run_train), which may wait until t_cap at the latest.
  LiveTrainIo(Prober& p, const std::atomic<bool>& stop, const char* phase,
              Session* session = nullptr, const Config* config = nullptr, Nanos t_cap = 0)
      : p_(p), stop_(stop), phase_(phase), session_(session), config_(config), t_cap_(t_cap) {}
  TrainRun run(const Train& train, const std::vector<int>& wait_for, Nanos reply_timeout,
               bool any = false, Nanos busy_wait = 0) override;
  Nanos now() override;
  void wait_until(Nanos mono) override;
  bool stopped() override;
  std::uint64_t bytes_sent() override { return p_.bytes_sent(); }
  std::uint64_t packets_sent() override { return p_.packets_sent(); }
  unsigned capture_drops() override;

 private:
  Prober& p_;
  const std::atomic<bool>& stop_;
  const char* phase_;
  Session* session_;
  const Config* config_;
  Nanos t_cap_;
  int checks_ = 0;
  bool stop_noted_ = false;
};

}  // namespace lw
