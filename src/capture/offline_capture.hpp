#pragma once
// The offline side of capture/: a pcap savefile (microsecond or nanosecond,
// any byte order libpcap reads) decoded packet by packet into the same
// `Decoded` records the live capture gives, timestamps in ns.
//
//   OfflineRead r = read_pcap_file("run.pcap");  // throws Error("capture", ...)
//   for (const Decoded& d : r.packets) ...
#include <cstdio>
#include <string>
#include <vector>

#include "capture/decode.hpp"
#include "capture/run_record.hpp"

namespace lw {

struct OfflineRead {
  int dlt = 0;                   // the file's link type
  std::vector<Decoded> packets;  // every packet that decoded, in file order
  unsigned undecodable = 0;      // packets that did not (other protocols, garbage)
  RunRecords records;            // --save-pcap's run records (capture/run_record.hpp)
  bool truncated = false;        // the file ended inside a record
};

// Reads the whole file and closes `f` in every case. `name` only labels errors.
// Throws Error("capture", ..., "bad_pcap") if it is not a pcap file.
OfflineRead read_pcap(std::FILE* f, const std::string& name);

// Throws Error("capture", ..., "unreadable_file") if `path` cannot be opened.
OfflineRead read_pcap_file(const std::string& path);

}  // namespace lw
