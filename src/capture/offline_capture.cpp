#include "capture/offline_capture.hpp"

#include <pcap/pcap.h>

#include <cerrno>
#include <cstring>

#include "linkwidth/error.hpp"

namespace lw {

OfflineRead read_pcap(std::FILE* f, const std::string& name) {
  char errbuf[PCAP_ERRBUF_SIZE] = {0};
  // Nanosecond precision: libpcap scales microsecond files up.
  pcap_t* p = pcap_fopen_offline_with_tstamp_precision(f, PCAP_TSTAMP_PRECISION_NANO, errbuf);
  if (!p) {
    std::fclose(f);  // on failure libpcap leaves the stream to us
    throw Error("capture", name + ": not a readable pcap file: " + errbuf, "bad_pcap");
  }
  OfflineRead r;
  r.dlt = pcap_datalink(p);
  pcap_pkthdr* h = nullptr;
  const u_char* bytes = nullptr;
  std::vector<std::uint8_t> body;
  for (;;) {
    const int rc = pcap_next_ex(p, &h, &bytes);
    if (rc == 1) {
      Decoded d;
      const Nanos ts = static_cast<Nanos>(h->ts.tv_sec) * kSec + static_cast<Nanos>(h->ts.tv_usec);
      if (decode_frame(r.dlt, bytes, h->caplen, d) != DecodeStatus::kOk) {
        if (parse_record_frame(r.dlt, bytes, h->caplen, body)) {
          r.records.add(ts, body);
        } else {
          ++r.undecodable;
        }
        continue;
      }
      d.ts = ts;
      r.packets.push_back(d);
      continue;
    }
    r.truncated = rc == PCAP_ERROR;  // PCAP_ERROR_BREAK (-2) is the clean end
    break;
  }
  pcap_close(p);  // closes f
  return r;
}

OfflineRead read_pcap_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    throw Error("capture", "cannot open " + path + ": " + std::strerror(errno), "unreadable_file");
  }
  return read_pcap(f, path);
}

}  // namespace lw
