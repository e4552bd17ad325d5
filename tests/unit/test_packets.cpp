// Build -> decode round trips through the real decoder, and decoder rejections.
#include <catch2/catch.hpp>
#include <set>

#include "capture/decode.hpp"
#include "plan/capacity_plan.hpp"
#include "send/packet_builder.hpp"

using namespace lw;

namespace {

Probe make(std::uint8_t flags, std::uint16_t len) {
  Probe p;
  p.src = 0xC6120101;  // 198.18.1.1
  p.dst = 0xC6120202;
  p.sport = 40000;
  p.dport = 47391;
  p.flags = flags;
  p.seq = 0x89abcdef;
  p.ack = (flags & kAck) ? 0x01020304 : 0;
  p.ip_len = len;
  p.ttl = 17;
  p.ip_id = 0x4c57;
  return p;
}

std::uint16_t checksum(const std::uint8_t* d, std::size_t n, std::uint32_t sum = 0) {
  for (std::size_t i = 0; i + 1 < n; i += 2)
    sum += static_cast<std::uint32_t>((d[i] << 8) | d[i + 1]);
  if (n & 1) sum += static_cast<std::uint32_t>(d[n - 1] << 8);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<std::uint16_t>(~sum);
}

}  // namespace

TEST_CASE("SYN, RST, RST/ACK and SYN/ACK survive build -> decode", "[packet]") {
  PacketBuilder b;
  struct Case {
    std::uint8_t flags;
    std::uint16_t len;
  } cases[] = {{kSyn, 40}, {kRst, 1500}, {kRst | kAck, 40}, {kSyn | kAck, 40}, {kRst, 64}};
  for (const auto& c : cases) {
    const Probe p = make(c.flags, c.len);
    const auto bytes = b.build(p);
    REQUIRE(bytes.size() == c.len);
    Decoded d;
    REQUIRE(decode_ipv4(bytes.data(), bytes.size(), d) == DecodeStatus::kOk);
    CHECK(d.src == p.src);
    CHECK(d.dst == p.dst);
    CHECK(d.proto == 6);
    CHECK(d.ttl == 17);
    CHECK(d.ip_id == 0x4c57);
    CHECK(d.ip_len == c.len);
    CHECK(d.sport == p.sport);
    CHECK(d.dport == p.dport);
    CHECK(d.seq == p.seq);
    CHECK(d.ack == p.ack);
    CHECK(d.tcp_flags == c.flags);
    // DF set, IP header checksum valid.
    CHECK((bytes[6] & 0x40) != 0);
    CHECK(checksum(bytes.data(), 20) == 0);
    // TCP checksum over the pseudo header validates.
    std::uint32_t pseudo = 0xC612 + 0x0101 + 0xC612 + 0x0202 + 6 + (c.len - 20u);
    CHECK(checksum(bytes.data() + 20, c.len - 20u, pseudo) == 0);
  }
}

TEST_CASE("load RSTs carry the probe signature", "[packet]") {
  PacketBuilder b;
  const auto bytes = b.build(make(kRst, 1500));
  const std::string payload(bytes.begin() + 40, bytes.begin() + 40 + 18);
  CHECK(payload == "linkwidth bandwidt");
}

TEST_CASE("decoder rejects truncated and garbage bytes", "[packet][decode]") {
  PacketBuilder b;
  const auto good = b.build(make(kSyn, 40));
  Decoded d;
  for (std::size_t n = 0; n < good.size(); ++n) {
    const auto st = decode_ipv4(good.data(), n, d);
    INFO("length " << n);
    CHECK(st != DecodeStatus::kOk);
  }
  std::vector<std::uint8_t> v6(40, 0);
  v6[0] = 0x60;
  CHECK(decode_ipv4(v6.data(), v6.size(), d) == DecodeStatus::kNotIp);
  auto bad_ihl = good;
  bad_ihl[0] = 0x44;
  CHECK(decode_ipv4(bad_ihl.data(), bad_ihl.size(), d) == DecodeStatus::kBadHeader);
  auto bad_len = good;
  bad_len[2] = 0;
  bad_len[3] = 10;
  CHECK(decode_ipv4(bad_len.data(), bad_len.size(), d) == DecodeStatus::kBadHeader);
  auto udp = good;
  udp[9] = 17;
  CHECK(decode_ipv4(udp.data(), udp.size(), d) == DecodeStatus::kUnsupported);
  auto frag = good;
  frag[7] = 5;  // fragment offset != 0
  CHECK(decode_ipv4(frag.data(), frag.size(), d) == DecodeStatus::kUnsupported);
  std::vector<std::uint8_t> junk = {0xff, 0x00, 0x13};
  CHECK(decode_frame(1, junk.data(), junk.size(), d) == DecodeStatus::kTruncated);
}

TEST_CASE("decoder reads a real RST/ACK frame and an ICMP time-exceeded quote", "[decode]") {
  // Ethernet + IPv4 + TCP RST/ACK as Linux sends it for a SYN to a closed port
  // (198.18.2.2:47391 -> 198.18.1.1:40000, ack = 0x89abcdf0).
  const std::vector<std::uint8_t> rst_ack = {
      0x02, 0,    0,    0,    0,    1,    0x02, 0,    0,    0,    0,    2,
      0x08, 0x00,                                                              // ethernet
      0x45, 0x00, 0x00, 0x28, 0x00, 0x00, 0x40, 0x00, 0x40, 0x06, 0,    0,     // ip
      0xc6, 0x12, 0x02, 0x02, 0xc6, 0x12, 0x01, 0x01,                          //
      0xb9, 0x1f, 0x9c, 0x40, 0,    0,    0,    0,    0x89, 0xab, 0xcd, 0xf0,  // tcp
      0x50, 0x14, 0,    0,    0,    0,    0,    0};
  Decoded d;
  REQUIRE(decode_frame(1, rst_ack.data(), rst_ack.size(), d) == DecodeStatus::kOk);
  CHECK(d.src == 0xC6120202);
  CHECK(d.sport == 47391);
  CHECK(d.dport == 40000);
  CHECK(d.ack == 0x89abcdf0);
  CHECK(d.tcp_flags == (kRst | kAck));

  // ICMP time exceeded from 198.18.1.2 quoting our SYN (IHL 6: with an option).
  std::vector<std::uint8_t> icmp = {
      0x45, 0xc0, 0x00, 0x3c, 0x12, 0x34, 0x00, 0x00, 0x40, 0x01, 0, 0,
      0xc6, 0x12, 0x01, 0x02, 0xc6, 0x12, 0x01, 0x01,  // ip: r1 -> us
      11,   0,    0,    0,    0,    0,    0,    0,     // icmp time exceeded
      0x46, 0x00, 0x00, 0x2c, 0x4c, 0x57, 0x40, 0x00, 0x01, 0x06, 0, 0,
      0xc6, 0x12, 0x01, 0x01, 0xc6, 0x12, 0x02, 0x02, 1,    0,    0, 0,  // quoted ip + option
      0x9c, 0x40, 0xb9, 0x1f, 0x89, 0xab, 0xcd, 0xef};                   // quoted tcp: 8 bytes
  REQUIRE(decode_ipv4(icmp.data(), icmp.size(), d) == DecodeStatus::kOk);
  CHECK(d.proto == 1);
  CHECK(d.icmp_type == 11);
  REQUIRE(d.quote.present);
  CHECK(d.quote.src == 0xC6120101);
  CHECK(d.quote.dst == 0xC6120202);
  CHECK(d.quote.sport == 40000);
  CHECK(d.quote.dport == 47391);
  CHECK(d.quote.seq == 0x89abcdef);
  CHECK(d.quote.ip_id == 0x4c57);
  // The same with the quote cut short: decodes, but without a quote.
  icmp.resize(icmp.size() - 4);
  icmp[3] = static_cast<std::uint8_t>(icmp.size());
  Decoded d2;
  REQUIRE(decode_ipv4(icmp.data(), icmp.size(), d2) == DecodeStatus::kOk);
  CHECK_FALSE(d2.quote.present);
}

TEST_CASE("capacity train layout: one 5-tuple, markers by sequence number", "[plan]") {
  CapacityTrainParams p;
  p.flow = {0xC6120101, 0xC6120202, 40000, 47391};
  p.load_packets = 10;
  SeqAllocator seqs(100);
  const Train t = make_capacity_train(p, 3, seqs);
  REQUIRE(t.probes.size() == 1 + 2 + 1 + 10 + 1);
  CHECK(t.probes[0].role == Role::kWarmup);
  CHECK(t.probes[1].role == Role::kDrain);
  REQUIRE(t.markers.size() == 2);
  CHECK(t.probes[t.markers[0]].flags == kSyn);
  CHECK(t.probes[t.markers[1]].flags == kSyn);
  CHECK(t.bits_from_head.back() == Approx(8.0 * (10 * 1500 + 40)));
  std::set<std::uint32_t> seen;
  for (const auto& q : t.probes) {
    CHECK(q.sport == 40000);
    CHECK(q.dport == 47391);
    CHECK(seen.insert(q.seq).second);
  }
  // Extra markers split the load evenly.
  p.markers = 3;
  const Train t3 = make_capacity_train(p, 4, seqs);
  REQUIRE(t3.markers.size() == 3);
  CHECK(t3.bits_from_head[1] == Approx(8.0 * (5 * 1500 + 40)));
}

TEST_CASE("paced trains space the load by the gap; markers ride behind a load packet", "[plan]") {
  CapacityTrainParams p;
  p.flow = {0xC6120101, 0xC6120202, 40000, 47391};
  p.load_packets = 6;
  p.gap = gap_for_rate(60e6, 1500);
  CHECK(p.gap == 200 * kUs);
  SeqAllocator seqs(1);
  const Train t = make_capacity_train(p, 0, seqs);
  const Nanos head = t.probes[t.markers.front()].offset;
  // Drain packets go back to back with the head; load packet i leaves (i+1)
  // gaps after the head, the tail right behind the last load packet.
  CHECK(t.probes[1].offset == head);
  int load = 0;
  for (int i = t.markers.front() + 1; i < t.markers.back(); ++i) {
    CHECK(t.probes[i].role == Role::kLoad);
    CHECK(t.probes[i].offset == head + (++load) * p.gap);
  }
  CHECK(t.probes[t.markers.back()].offset == head + 6 * p.gap);
  // With inner markers the offered rate stays L*8/gap: each marker shares the
  // departure of the load packet ahead of it.
  p.markers = 4;
  const Train t4 = make_capacity_train(p, 1, seqs);
  REQUIRE(t4.markers.size() == 4);
  const Nanos h4 = t4.probes[t4.markers.front()].offset;
  CHECK(t4.probes[t4.markers[1]].offset == h4 + 2 * p.gap);
  CHECK(t4.probes[t4.markers[2]].offset == h4 + 4 * p.gap);
  CHECK(t4.probes[t4.markers[3]].offset == h4 + 6 * p.gap);
}

TEST_CASE("a first segment puts the second marker where six even markers put it", "[plan]") {
  CapacityTrainParams p;
  p.flow = {0xC6120101, 0xC6120202, 40000, 47391};
  p.load_packets = 23;
  p.gap = gap_for_rate(60e6, 1500);
  SeqAllocator seqs(1);
  p.markers = 6;
  const Train even = make_capacity_train(p, 0, seqs);
  p.markers = 3;
  p.first_segment = p.load_packets / 5;
  const Train three = make_capacity_train(p, 1, seqs);
  REQUIRE(even.markers.size() == 6);
  REQUIRE(three.markers.size() == 3);
  auto at = [](const Train& t, int m) { return t.probes[t.markers[m]].offset; };
  // The ratio's span (second marker to tail) and its bits are the same.
  CHECK(at(three, 0) == at(even, 0));
  CHECK(at(three, 1) == at(even, 1));
  CHECK(at(three, 2) == at(even, 5));
  CHECK(three.bits_from_head[2] - three.bits_from_head[1] ==
        Approx(even.bits_from_head[5] - even.bits_from_head[1] - 3 * 8.0 * 40));
  // Every load packet is still there, at its own gap after the head.
  int load = 0;
  for (const auto& q : three.probes) load += q.role == Role::kLoad ? 1 : 0;
  CHECK(load == 23);
  // Four markers: the first segment, then the rest split evenly (4 + 9 + 10).
  p.markers = 4;
  const Train four = make_capacity_train(p, 2, seqs);
  REQUIRE(four.markers.size() == 4);
  CHECK(at(four, 1) == at(four, 0) + 4 * p.gap);
  CHECK(at(four, 2) == at(four, 0) + 13 * p.gap);
  CHECK(at(four, 3) == at(four, 0) + 23 * p.gap);
  // Two markers ignore it; a segment longer than the load is clamped.
  p.markers = 3;
  p.first_segment = 99;
  const Train clamped = make_capacity_train(p, 3, seqs);
  CHECK(at(clamped, 1) == at(clamped, 2));
}

TEST_CASE("the paper's pair train: gaps from the offered rate (section 3.5.1)", "[plan]") {
  PairTrainParams p;
  p.flow = {0xC6120101, 0xC6120202, 40000, 47391};
  p.pairs = 10;
  p.packet_size = 1500;
  const PairGaps g = pair_gaps_for_rate(40e6, p.pairs, 1500, 100 * kUs);
  REQUIRE(g.reachable);
  p.intra_gap = g.intra_gap;
  p.inter_gap = g.inter_gap;
  SeqAllocator seqs(1);
  const Train t = make_pair_train(p, 0, seqs);
  REQUIRE(t.probes.size() == 22u);
  REQUIRE(t.markers == std::vector<int>{0, 21});
  CHECK(t.probes[0].flags == kSyn);
  CHECK(t.probes[21].flags == kSyn);
  for (int i = 1; i <= 20; ++i) CHECK(t.probes[i].flags == kRst);
  // The head-to-tail send span offers the rate asked for.
  const double span = to_seconds(t.probes[21].offset - t.probes[0].offset);
  CHECK(t.bits_from_head.back() / span == Approx(40e6).epsilon(0.002));
  // Pairs: the gap inside each pair is the computed one, between pairs Δr_t.
  CHECK(t.probes[1].offset == t.probes[0].offset);
  CHECK(t.probes[2].offset - t.probes[1].offset == g.intra_gap);
  CHECK(t.probes[3].offset - t.probes[2].offset == 100 * kUs);
  CHECK(t.probes[21].offset == t.probes[20].offset);
  // Too fast for the fixed inter-pair gap: flagged, intra gap clamped at 0.
  const PairGaps fast = pair_gaps_for_rate(10e9, 10, 1500, 100 * kUs);
  CHECK_FALSE(fast.reachable);
  CHECK(fast.intra_gap == 0);
}
