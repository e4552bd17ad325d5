#pragma once
// One interface over live libpcap: nanosecond host timestamps, both directions
// (our own outgoing probes show when they left the qdisc), a short buffer
// timeout rather than immediate mode (immediate mode wakes us per packet and
// perturbs the pacer; the kernel stamps packets either way).
#include <string>
#include <vector>

#include "capture/decode.hpp"

struct pcap;
struct pcap_dumper;

namespace lw {

struct CaptureStats {
  unsigned received = 0;
  unsigned dropped = 0;  // by the kernel (buffer full)
  unsigned if_dropped = 0;
  unsigned undecodable = 0;  // frames matching the filter that did not decode
};

class LiveCapture {
 public:
  LiveCapture(const std::string& interface, const std::string& bpf_filter, int snaplen = 128,
              int buffer_bytes = 16 << 20);
  ~LiveCapture();
  LiveCapture(const LiveCapture&) = delete;
  LiveCapture& operator=(const LiveCapture&) = delete;

  // From now on also writes every captured packet (both directions, as the
  // filter passes them, snapped to the snaplen) to a pcap file with nanosecond
  // timestamps; flushed and closed with the capture. Throws Error
  // ("unwritable_file") if the file cannot be created.
  void save_to(const std::string& path);

  // With save_to: writes a run record (capture/run_record.hpp) stamped `ts`
  // (CLOCK_REALTIME ns) into the file; nothing otherwise.
  void save_record(Nanos ts, const std::vector<std::uint8_t>& body);

  // Appends every packet available now, without blocking. Returns how many.
  std::size_t drain(std::vector<Decoded>& out);
  // Blocks until something may be readable or `timeout` passes.
  void wait(Nanos timeout);
  CaptureStats stats();
  int datalink() const { return dlt_; }

 private:
  pcap* p_ = nullptr;
  pcap_dumper* dumper_ = nullptr;
  int dlt_ = 0;
  int fd_ = -1;
  unsigned undecodable_ = 0;
};

}  // namespace lw
