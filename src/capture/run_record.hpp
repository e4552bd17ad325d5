#pragma once
// Run records: what `--save-pcap` writes beside the captured packets so that
// `linkwidth analyze` can rebuild every train without a sidecar file.
//
// A record is a pseudo-frame in the capture's own link type (Ethernet or Linux
// cooked) with the IEEE local-experimental ethertype 0x88B5, so tcpdump and
// Wireshark show it as such and the packet decoder skips it (not IPv4). Its
// body starts with the magic "LWR1" and a type byte:
//   'S' send record, one per probe that left: the probe's header fields; the
//       record's pcap timestamp is the user-space send time (CLOCK_REALTIME,
//       the offered schedule the estimators use, which the capture alone
//       cannot give: it sees the packets after our qdisc).
//   '6' the same for an IPv6 probe: 16-byte addresses, then the 'S' fields,
//       then the flow label (68 bytes in all, inside the 128-byte snaplen).
//   'N' note: UTF-8 JSON text describing the run or one train (phase, length
//       group, sizing), split in chunks that fit the capture's 128-byte
//       snaplen (libpcap cuts longer records when it reads the file back).
//
//   capture.save_record(sent_real, send_record_body(probe));
//   for (auto& b : note_bodies(id, json.dump())) capture.save_record(now, b);
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "linkwidth/time.hpp"
#include "plan/probe.hpp"

namespace lw {

constexpr std::uint16_t kRecordEthertype = 0x88B5;

// The link-layer frame around `body` for a capture of link type `dlt`; empty
// if records are not supported for that link type (nothing is then written).
std::vector<std::uint8_t> record_frame(int dlt, const std::vector<std::uint8_t>& body);

// The record body inside a captured frame; false if the frame is not a record.
bool parse_record_frame(int dlt, const std::uint8_t* data, std::size_t len,
                        std::vector<std::uint8_t>& body);

std::vector<std::uint8_t> send_record_body(const Probe& p);
// Chunks of `text`, each a note body with at most `chunk` bytes of text.
std::vector<std::vector<std::uint8_t>> note_bodies(std::uint32_t note_id, const std::string& text,
                                                   std::size_t chunk = 64);

struct SentProbe {
  Probe probe;     // header fields, role, train id, index, planned offset and ack (0 in older records)
  Nanos sent = 0;  // user-space send time (CLOCK_REALTIME ns)
};

// One run's records in file order: notes (reassembled) and send records.
struct RunRecords {
  struct Item {
    bool is_note = false;
    Nanos ts = 0;      // when the note was written (its first chunk)
    std::string note;  // JSON text (is_note)
    SentProbe sent;    // otherwise
  };
  std::vector<Item> items;
  unsigned malformed = 0;  // records with the magic that did not parse

  // Adds one record body (as parse_record_frame gave it) taken at `ts`.
  void add(Nanos ts, const std::vector<std::uint8_t>& body);

 private:
  struct Partial {
    std::size_t item = 0;  // index into items of the note being filled
    std::uint16_t parts = 0;
    std::uint16_t seen = 0;
  };
  std::map<std::uint32_t, Partial> open_;
};

}  // namespace lw
