// libFuzzer target for the reply decoder and the pcap reading path.
//
// The first input byte picks the path:
//   even: a captured frame: the second byte picks the link type (Ethernet,
//         Linux cooked, raw IP, IPv4, an unknown one, IPv6), the rest is the
//         frame handed to decode_frame() and, from its start, to decode_ipv4()
//         and decode_ipv6();
//   odd:  the rest is a pcap savefile, read through fmemopen() and
//         read_pcap() (pcap_fopen_offline, then decode_frame per packet, run
//         records), then re-run by analyze_capacity() as `linkwidth analyze`.
// Build: cmake -DLINKWIDTH_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ (see README).
#include <pcap/dlt.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "app/frontends/analyze.hpp"
#include "capture/decode.hpp"
#include "capture/offline_capture.hpp"
#include "linkwidth/error.hpp"

namespace {

void check_record(const lw::Decoded& d) {
  // Fields a length-checked decoder can promise whatever the input.
  if (d.proto == 6 && d.icmp_type != 0) __builtin_trap();
  if (d.quote.present && !lw::is_icmp_proto(d.proto)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t mode = data[0];
  ++data;
  --size;
  if ((mode & 1) == 0) {
    if (size < 1) return 0;
    static const int kDlts[] = {DLT_EN10MB, DLT_LINUX_SLL, DLT_RAW, DLT_IPV4, 147, DLT_IPV6};
    const int dlt = kDlts[data[0] % 6];
    // A copy of exactly the frame's length, so ASan sees any read past it.
    const std::vector<std::uint8_t> frame(data + 1, data + size);
    lw::Decoded d;
    if (lw::decode_frame(dlt, frame.data(), frame.size(), d) == lw::DecodeStatus::kOk) {
      check_record(d);
    }
    lw::Decoded d2;
    if (lw::decode_ipv4(frame.data(), frame.size(), d2) == lw::DecodeStatus::kOk) {
      check_record(d2);
    }
    lw::Decoded d3;
    if (lw::decode_ipv6(frame.data(), frame.size(), d3) == lw::DecodeStatus::kOk) {
      check_record(d3);
      if (d3.ip_len < 40) __builtin_trap();
    }
    return 0;
  }
  // fmemopen refuses a zero-length buffer.
  std::vector<std::uint8_t> file(data, data + size);
  if (file.empty()) return 0;
  std::FILE* f = fmemopen(file.data(), file.size(), "rb");
  if (!f) return 0;
  try {
    const lw::OfflineRead r = lw::read_pcap(f, "fuzz input");
    for (const auto& d : r.packets) check_record(d);
    // `linkwidth analyze` on it: run records, train rebuild, matching, the
    // capacity tally, the replayed phases. A file it cannot re-run is an
    // Error (exit 2).
    try {
      const lw::AnalyzedRun run = lw::analyze_run(r, "fuzz input", false);
      if (run.capacity.trains_used > run.capacity.trains_sent) __builtin_trap();
    } catch (const lw::Error&) {
    }
  } catch (const lw::Error&) {
    // Not a pcap file: a clean refusal is the right answer.
  }
  return 0;
}
