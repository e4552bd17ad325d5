#include "capture/run_record.hpp"

#include <pcap/dlt.h>

#include <algorithm>
#include <cstring>

namespace lw {

namespace {

constexpr char kMagic[4] = {'L', 'W', 'R', '1'};
constexpr std::size_t kSllLen = 16, kSll2Len = 20, kEthLen = 14;

void put16(std::vector<std::uint8_t>& b, std::uint32_t v) {
  b.push_back(static_cast<std::uint8_t>(v >> 8));
  b.push_back(static_cast<std::uint8_t>(v));
}
void put32(std::vector<std::uint8_t>& b, std::uint32_t v) {
  put16(b, v >> 16);
  put16(b, v & 0xffff);
}
std::uint32_t get16(const std::uint8_t* p) { return (std::uint32_t{p[0]} << 8) | p[1]; }
std::uint32_t get32(const std::uint8_t* p) { return (get16(p) << 16) | get16(p + 2); }

std::vector<std::uint8_t> head(char type) {
  std::vector<std::uint8_t> b(kMagic, kMagic + 4);
  b.push_back(static_cast<std::uint8_t>(type));
  return b;
}

constexpr std::size_t kSendLen = 5 + 4 + 4 + 4 + 2 + 1 + 1 + 2 + 1 + 4 + 2 + 2;
constexpr std::size_t kSend6Len = 5 + 16 + 16 + 4 + 2 + 1 + 1 + 2 + 1 + 4 + 2 + 2 + 8 + 4;

void put_addr6(std::vector<std::uint8_t>& b, const IpAddr& a) {
  b.insert(b.end(), a.bytes6().begin(), a.bytes6().end());
}

// The fields after the addresses, shared by 'S' and '6' records.
void put_probe_fields(std::vector<std::uint8_t>& b, const Probe& p) {
  put32(b, p.seq);
  put16(b, p.sport);
  b.push_back(static_cast<std::uint8_t>(p.role));
  b.push_back(p.flags);
  put16(b, p.ip_len);
  b.push_back(p.ttl);
  put32(b, static_cast<std::uint32_t>(p.train));
  put16(b, static_cast<std::uint32_t>(p.index));
  put16(b, p.dport);
}

// Reads what put_probe_fields wrote; false for an unknown role.
bool get_probe_fields(const std::uint8_t* p, Probe& q) {
  q.seq = get32(p);
  q.sport = static_cast<std::uint16_t>(get16(p + 4));
  const std::uint8_t role = p[6];
  if (role > static_cast<std::uint8_t>(Role::kCloser)) return false;
  q.role = static_cast<Role>(role);
  q.flags = p[7];
  q.ip_len = static_cast<std::uint16_t>(get16(p + 8));
  q.ttl = p[10];
  q.train = static_cast<int>(get32(p + 11));
  q.index = static_cast<int>(get16(p + 15));
  q.dport = static_cast<std::uint16_t>(get16(p + 17));
  return true;
}
constexpr std::size_t kNoteHead = 5 + 4 + 2 + 2;

}  // namespace

std::vector<std::uint8_t> record_frame(int dlt, const std::vector<std::uint8_t>& body) {
  std::vector<std::uint8_t> f;
  if (dlt == DLT_EN10MB) {
    f.assign(12, 0);  // no MAC addresses: the record never was on a wire
    put16(f, kRecordEthertype);
  } else if (dlt == DLT_LINUX_SLL) {
    put16(f, 4);  // "sent by us"
    put16(f, 0xFFFF);
    put16(f, 0);
    f.resize(14, 0);
    put16(f, kRecordEthertype);
  } else if (dlt == DLT_LINUX_SLL2) {
    put16(f, kRecordEthertype);
    f.resize(kSll2Len, 0);
    f[10] = 4;  // pkttype: outgoing
  } else {
    return {};
  }
  f.insert(f.end(), body.begin(), body.end());
  return f;
}

bool parse_record_frame(int dlt, const std::uint8_t* data, std::size_t len,
                        std::vector<std::uint8_t>& body) {
  std::size_t off = 0;
  std::size_t type_at = 0;
  if (dlt == DLT_EN10MB) {
    off = kEthLen, type_at = 12;
  } else if (dlt == DLT_LINUX_SLL) {
    off = kSllLen, type_at = 14;
  } else if (dlt == DLT_LINUX_SLL2) {
    off = kSll2Len, type_at = 0;
  } else {
    return false;
  }
  if (len < off + 5 || get16(data + type_at) != kRecordEthertype) return false;
  if (std::memcmp(data + off, kMagic, 4) != 0) return false;
  body.assign(data + off, data + len);
  return true;
}

std::vector<std::uint8_t> send_record_body(const Probe& p) {
  const bool v6 = p.dst.is_v6();
  std::vector<std::uint8_t> b = head(v6 ? '6' : 'S');
  if (v6) {
    put_addr6(b, p.src);
    put_addr6(b, p.dst);
  } else {
    put32(b, p.src.v4());
    put32(b, p.dst.v4());
  }
  put_probe_fields(b, p);
  // The planned departure (ns after the train's start): the stall check of
  // paced trains compares it with the send time. Older records end before it.
  const auto off = static_cast<std::uint64_t>(p.offset);
  put32(b, static_cast<std::uint32_t>(off >> 32));
  put32(b, static_cast<std::uint32_t>(off & 0xffffffffu));
  if (v6) put32(b, p.flow_label);
  // The ack number: a bare-ACK marker's tag, which its RST carries back as
  // its seq (plan/target_marker.hpp). Older records end before it.
  put32(b, p.ack);
  return b;
}

std::vector<std::vector<std::uint8_t>> note_bodies(std::uint32_t note_id, const std::string& text,
                                                   std::size_t chunk) {
  std::vector<std::vector<std::uint8_t>> out;
  chunk = std::max<std::size_t>(1, chunk);
  const std::size_t parts = std::max<std::size_t>(1, (text.size() + chunk - 1) / chunk);
  for (std::size_t i = 0; i < parts; ++i) {
    std::vector<std::uint8_t> b = head('N');
    put32(b, note_id);
    put16(b, static_cast<std::uint32_t>(i));
    put16(b, static_cast<std::uint32_t>(parts));
    const std::size_t from = i * chunk, to = std::min(text.size(), from + chunk);
    b.insert(b.end(), text.begin() + static_cast<std::ptrdiff_t>(from),
             text.begin() + static_cast<std::ptrdiff_t>(to));
    out.push_back(std::move(b));
  }
  return out;
}

void RunRecords::add(Nanos ts, const std::vector<std::uint8_t>& b) {
  if (b.size() < 5 || std::memcmp(b.data(), kMagic, 4) != 0) {
    ++malformed;
    return;
  }
  const std::uint8_t* p = b.data() + 5;
  if (b[4] == 'S' && b.size() >= kSendLen) {
    Item it;
    Probe& q = it.sent.probe;
    q.src = get32(p);
    q.dst = get32(p + 4);
    if (!get_probe_fields(p + 8, q)) {
      ++malformed;
      return;
    }
    if (b.size() >= kSendLen + 8) {
      const std::uint64_t off = (std::uint64_t{get32(p + 27)} << 32) | get32(p + 31);
      q.offset = static_cast<Nanos>(off);
    }
    if (b.size() >= kSendLen + 12) q.ack = get32(p + 35);
    it.sent.sent = ts;
    items.push_back(std::move(it));
    return;
  }
  if (b[4] == '6' && b.size() >= kSend6Len) {
    Item it;
    Probe& q = it.sent.probe;
    q.src = IpAddr::v6_from(p);
    q.dst = IpAddr::v6_from(p + 16);
    if (!get_probe_fields(p + 32, q)) {
      ++malformed;
      return;
    }
    const std::uint64_t off = (std::uint64_t{get32(p + 51)} << 32) | get32(p + 55);
    q.offset = static_cast<Nanos>(off);
    q.flow_label = get32(p + 59) & 0xfffffu;
    if (b.size() >= kSend6Len + 4) q.ack = get32(p + 63);
    it.sent.sent = ts;
    items.push_back(std::move(it));
    return;
  }
  if (b[4] == 'N' && b.size() >= kNoteHead) {
    const std::uint32_t id = get32(p);
    const auto part = static_cast<std::uint16_t>(get16(p + 4));
    const auto parts = static_cast<std::uint16_t>(get16(p + 6));
    const std::string text(b.begin() + kNoteHead, b.end());
    auto at = open_.find(id);
    if (part == 0) {
      if (parts == 0) {
        ++malformed;
        return;
      }
      Item it;
      it.is_note = true;
      it.ts = ts;
      it.note = text;
      items.push_back(std::move(it));
      if (parts > 1) open_[id] = Partial{items.size() - 1, parts, 1};
      return;
    }
    // Chunks arrive in order; a gap (a chunk lost) spoils the note.
    if (at == open_.end() || part != at->second.seen || parts != at->second.parts) {
      ++malformed;
      return;
    }
    items[at->second.item].note += text;
    if (++at->second.seen == parts) open_.erase(at);
    return;
  }
  ++malformed;
}

}  // namespace lw
