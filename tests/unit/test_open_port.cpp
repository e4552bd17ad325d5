// Open-port and bare-ACK markers (plan/target_marker.hpp): the packets each
// kind sends, the decoding and matching of their replies by ack (or seq)
// number, the run records that carry them, and discovery's decision table.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "app/plumbing/discovery_rules.hpp"
#include "capture/decode.hpp"
#include "capture/run_record.hpp"
#include "match/match.hpp"
#include "plan/capacity_plan.hpp"
#include "plan/hops_plan.hpp"
#include "plan/shaper_plan.hpp"
#include "plan/syn_train.hpp"
#include "nlohmann/json.hpp"
#include "plan/target_marker.hpp"

using namespace lw;

namespace {

constexpr std::uint32_t kSelf = 0xC6120101, kTarget = 0xC6120202, kRouter = 0xC6120102;

FlowId flow(TargetMarker k, std::uint16_t dport = 443) {
  FlowId f{kSelf, kTarget, 40000, dport};
  f.marker = k;
  return f;
}

Train capacity_train(TargetMarker k, int markers = 2, Nanos gap = 0) {
  CapacityTrainParams p;
  p.flow = flow(k);
  p.load_packets = 6;
  p.markers = markers;
  p.gap = gap;
  SeqAllocator seqs(7001);
  return make_capacity_train(p, 3, seqs);
}

bool plain_syn(const Probe& p) { return p.flags == kSyn; }

// Every plain SYN to the target is followed, before the next such SYN, by an
// RST in its 4-tuple with seq = ISN + 1; returns how many were inserted
// (role closer) rather than taken from the train's own RSTs.
int check_closers(const Train& t, std::uint8_t min_ttl = 1) {
  int inserted = 0;
  for (std::size_t i = 0; i < t.probes.size(); ++i) {
    const Probe& s = t.probes[i];
    if (!plain_syn(s) || s.ttl < min_ttl) continue;
    INFO("SYN at " << i);
    bool closed = false;
    for (std::size_t j = i + 1; j < t.probes.size(); ++j) {
      const Probe& q = t.probes[j];
      if (plain_syn(q) && q.dst == s.dst && q.dport == s.dport && q.ttl >= min_ttl) break;
      if (q.flags == kRst && q.seq == s.seq + 1 && q.dport == s.dport && q.dst == s.dst &&
          q.ttl >= s.ttl) {
        closed = true;
        inserted += q.role == Role::kCloser ? 1 : 0;
        CHECK(q.offset >= s.offset);
        break;
      }
    }
    CHECK(closed);
  }
  return inserted;
}

std::vector<SendRecord> sent_all(const Train& t) {
  std::vector<SendRecord> r(t.probes.size());
  for (std::size_t i = 0; i < r.size(); ++i) {
    r[i].sent = true;
    r[i].actual_real = 1000 + static_cast<Nanos>(i) * 10;
  }
  return r;
}

Decoded from_target(const Probe& p, Nanos ts, std::uint8_t flags, std::uint32_t seq,
                    std::uint32_t ack) {
  Decoded d;
  d.ts = ts;
  d.src = p.dst;
  d.dst = p.src;
  d.proto = 6;
  d.sport = p.dport;
  d.dport = p.sport;
  d.seq = seq;
  d.ack = ack;
  d.tcp_flags = flags;
  return d;
}

}  // namespace

TEST_CASE("marker kinds have JSON names and parse back", "[plan][open_port]") {
  for (TargetMarker k : {TargetMarker::kClosedSyn, TargetMarker::kOpenSyn, TargetMarker::kAck}) {
    TargetMarker back = TargetMarker::kClosedSyn;
    REQUIRE(from_name(name(k), &back));
    CHECK(back == k);
    CHECK(nlohmann::json(k).get<TargetMarker>() == k);
  }
  CHECK(nlohmann::json(TargetMarker::kOpenSyn) == "open_syn");
  CHECK(nlohmann::json(MarkerKind::kTarget) == "target");
  TargetMarker x;
  CHECK_FALSE(from_name("open", &x));
  // A record naming an unknown kind is damaged: an error, never a default.
  CHECK_THROWS(nlohmann::json("open").get<TargetMarker>());
  CHECK_THROWS(nlohmann::json("router").get<MarkerKind>());
}

TEST_CASE("closed-port trains are not touched", "[plan][open_port]") {
  const Train t = capacity_train(TargetMarker::kClosedSyn);
  CHECK(t.probes.size() == 1 + 2 + 2 + 6);  // warm-up, drains, head + tail, load
  for (const Probe& p : t.probes) CHECK(p.role != Role::kCloser);
}

TEST_CASE("open-port capacity train: every SYN is reset by the next RST, the tail by a closer",
          "[plan][open_port]") {
  const Train closed = capacity_train(TargetMarker::kClosedSyn, 3, 10 * kUs);
  const Train t = capacity_train(TargetMarker::kOpenSyn, 3, 10 * kUs);
  // Warm-up -> first drain, head -> first load, middle marker -> next load;
  // only the tail needs an inserted closer.
  CHECK(check_closers(t) == 1);
  REQUIRE(t.probes.size() == closed.probes.size() + 1);
  const Probe& last = t.probes.back();
  CHECK(last.role == Role::kCloser);
  CHECK(last.ip_len == kCloserBytes);
  CHECK(last.seq == t.probes[t.markers.back()].seq + 1);
  CHECK(last.offset == t.probes[t.markers.back()].offset + 10 * kUs);  // one gap later
  // Same markers, same bits between them (the closer leaves after the tail).
  REQUIRE(t.markers.size() == 3);
  for (std::size_t m = 0; m < t.markers.size(); ++m) {
    CHECK(t.probes[t.markers[m]].flags == kSyn);
    CHECK(t.markers[m] == closed.markers[m]);
    CHECK(t.bits_from_head[m] == Approx(closed.bits_from_head[m]));
  }
  for (std::size_t i = 0; i < t.probes.size(); ++i) CHECK(t.probes[i].index == static_cast<int>(i));
  // The load RSTs that close a SYN carry its ISN + 1; sequence numbers stay unique.
  std::set<std::uint32_t> seqs;
  for (const Probe& p : t.probes) seqs.insert(p.seq);
  CHECK(seqs.size() == t.probes.size());
}

TEST_CASE("open-port SYN trains and sweeps get a closer after each SYN; bits count them",
          "[plan][open_port]") {
  SynTrainParams sp;
  sp.flow = flow(TargetMarker::kOpenSyn);
  sp.markers = 3;
  sp.drain = 1;
  SeqAllocator seqs(9);
  const Train t = make_syn_train(sp, 1, seqs);
  CHECK(check_closers(t) == 4);  // drain + 3 markers, none followed by an RST
  REQUIRE(t.probes.size() == 8);
  REQUIRE(t.markers.size() == 3);
  // Between markers: the closer of the previous SYN and the next SYN.
  CHECK(t.bits_from_head[1] == Approx(8.0 * (kCloserBytes + 1500)));
  CHECK(t.bits_from_head[2] == Approx(16.0 * (kCloserBytes + 1500)));

  const Train sweep = make_ttl_sweep(flow(TargetMarker::kOpenSyn), {1, 2, 3}, kMs, -100, seqs);
  CHECK(check_closers(sweep) == 3);
  REQUIRE(sweep.markers.size() == 3);
  for (int i = 0; i < 3; ++i) {
    const Probe& s = sweep.probes[sweep.markers[i]];
    CHECK(s.ttl == i + 1);
    const Probe& c = sweep.probes[sweep.markers[i] + 1];
    CHECK(c.role == Role::kCloser);
    CHECK(c.ttl == 64);  // reaches the target whatever TTL the SYN had
    CHECK(c.offset == s.offset);
  }
}

TEST_CASE("open-port shaper stream: every marker SYN is reset, the markers' bits unchanged",
          "[plan][open_port][shaper]") {
  // The stream was built with closed-port SYNs whatever the flow: on a target
  // with only 443 open each marker left a half-open connection (the lab's
  // open-port test, once the routine check sent a stream on every path).
  ShaperStreamParams p;
  p.flow = flow(TargetMarker::kOpenSyn);
  p.load_packets = 200;
  p.markers = 12;
  p.gap = 20 * kUs;
  ShaperStreamParams pc = p;
  pc.flow.marker = TargetMarker::kClosedSyn;
  SeqAllocator seqs(1), seqs2(1);
  const Train closed = make_shaper_train(pc, -600, seqs2);
  const Train t = make_shaper_train(p, -600, seqs);
  // The warm-up (the head follows it at once) and the tail need inserted
  // closers; every other marker is closed by the load packet after it.
  CHECK(check_closers(t) == 2);
  CHECK(t.probes.size() == closed.probes.size() + 2);
  REQUIRE(t.markers.size() == closed.markers.size());
  for (std::size_t m = 0; m < t.markers.size(); ++m) {
    CHECK(t.probes[t.markers[m]].flags == kSyn);
    CHECK(t.probes[t.markers[m]].dport == 443);
    CHECK(t.bits_from_head[m] == Approx(closed.bits_from_head[m]));
  }
  const Train acks = make_shaper_train([&] {
    ShaperStreamParams a = p;
    a.flow.marker = TargetMarker::kAck;
    return a;
  }(), -601, seqs);
  for (int i : acks.markers) CHECK(acks.probes[i].is_bare_ack());
}

TEST_CASE("open-port hops train: full-TTL SYNs get closers, routers another port",
          "[plan][open_port]") {
  RecursiveTrainParams p;
  p.flow = flow(TargetMarker::kOpenSyn);
  p.hops = {{1, 0, MarkerKind::kTtl}, {2, kRouter, MarkerKind::kAddr}, {3, kTarget, MarkerKind::kTarget}};
  p.load_packets = 5;
  SeqAllocator seqs(1);
  RecursiveTrainParams pc = p;
  pc.flow.marker = TargetMarker::kClosedSyn;
  SeqAllocator seqs2(1);
  const RecursiveTrain closed = make_recursive_train(pc, 0, seqs2);
  const RecursiveTrain rt = make_recursive_train(p, 0, seqs);
  // The target's tail marker and both of the router's markers (its head is
  // followed by the target's head, its tail by the TTL-limited tail);
  // the target's head is closed by the first load packet.
  CHECK(check_closers(rt.train, 64) == 3);
  CHECK(rt.train.probes.size() == closed.train.probes.size() + 3);
  for (int k = 0; k < 3; ++k) {
    INFO("hop " << k + 1);
    const Probe& h = rt.train.probes[rt.head[k]];
    CHECK(h.flags == kSyn);
    CHECK(rt.train.probes[rt.tail[k]].flags == kSyn);
    CHECK(h.ttl == closed.train.probes[closed.head[k]].ttl);
    CHECK(rt.train.probes[rt.tail[k]].dst == closed.train.probes[closed.tail[k]].dst);
    CHECK(h.dport == (k == 1 ? kRouterMarkerPort : 443));
    double bits = 0;
    for (int i = rt.head[k] + 1; i <= rt.tail[k]; ++i) bits += 8.0 * rt.train.probes[i].ip_len;
    CHECK(rt.bits[k] == Approx(bits));
  }
  // Hop 3 (the target): only its own tail lies between, no closer.
  CHECK(rt.bits[2] == Approx(closed.bits[2]));
  // Hop 1's markers enclose all three closers.
  CHECK(rt.bits[0] == Approx(closed.bits[0] + 3 * 8.0 * kCloserBytes));
  // TTL-limited SYNs expire at routers: none has a closer.
  for (const Probe& q : rt.train.probes) {
    if (q.flags == kRst) CHECK(q.seq != rt.train.probes[rt.head[0]].seq + 1);
  }
}

TEST_CASE("bare-ACK trains: SYNs to the target become ACKs with unique tags", "[plan][open_port]") {
  const Train closed = capacity_train(TargetMarker::kClosedSyn);
  const Train t = capacity_train(TargetMarker::kAck);
  REQUIRE(t.probes.size() == closed.probes.size());
  std::set<std::uint32_t> tags;
  for (std::size_t i = 0; i < t.probes.size(); ++i) {
    const Probe& p = t.probes[i];
    CHECK(p.ip_len == closed.probes[i].ip_len);
    CHECK(p.role == closed.probes[i].role);
    if (closed.probes[i].flags == kSyn) {
      CHECK(p.flags == kAck);
      CHECK(p.is_bare_ack());
      tags.insert(p.ack);
    } else {
      CHECK(p.flags == kRst);
    }
  }
  CHECK(tags.size() == 3);  // warm-up, head, tail
  CHECK(t.bits_from_head == closed.bits_from_head);
  // Routers' own addresses keep SYNs, to a port that is rarely served, each
  // reset at once in case it listens there.
  SeqAllocator seqs(3);
  const Train chk = make_addr_check(flow(TargetMarker::kAck), {kRouter, kTarget}, kMs, -2, seqs);
  REQUIRE(chk.probes.size() == 3);
  CHECK(chk.probes[0].flags == kSyn);
  CHECK(chk.probes[0].dport == kRouterMarkerPort);
  CHECK(chk.probes[1].role == Role::kCloser);
  CHECK(chk.probes[2].flags == kAck);
  CHECK(chk.markers == std::vector<int>{0, 2});
}

TEST_CASE("decoder reads a listening port's SYN/ACK and the RST to a bare ACK", "[decode][open_port]") {
  // Ethernet + IPv4 + TCP SYN/ACK as Linux 6.18 answered our SYN (no options)
  // on a listening port in the lab (tcpdump -xx of a --save-pcap capture):
  // 198.18.2.2:443 -> 198.18.1.1:51425, seq 64444224, ack 475086402, TTL 63,
  // IP ID 0, DF, data offset 6 (MSS 1460), window 64240.
  const std::vector<std::uint8_t> frame = {
      0x2e, 0xca, 0xef, 0xd7, 0x2a, 0x95, 0x6e, 0x89, 0x11, 0x1e, 0xed, 0xed, 0x08, 0x00,
      0x45, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x40, 0x00, 0x3f, 0x06, 0xac, 0xa4, 0xc6, 0x12,
      0x02, 0x02, 0xc6, 0x12, 0x01, 0x01, 0x01, 0xbb, 0xc8, 0xe1, 0x03, 0xd7, 0x57, 0x40,
      0x1c, 0x51, 0x3e, 0x42, 0x60, 0x12, 0xfa, 0xf0, 0x8d, 0xb6, 0x00, 0x00, 0x02, 0x04,
      0x05, 0xb4};
  Decoded d;
  REQUIRE(decode_frame(1, frame.data(), frame.size(), d) == DecodeStatus::kOk);
  CHECK(d.src == kTarget);
  CHECK(d.dst == kSelf);
  CHECK(d.sport == 443);
  CHECK(d.dport == 51425);
  CHECK(d.seq == 64444224u);
  CHECK(d.ack == 475086402u);
  CHECK(d.tcp_flags == (kSyn | kAck));
  CHECK(d.ip_len == 44);
  CHECK(d.ttl == 63);
  CHECK(d.ip_id == 0);
  // Matched to the SYN whose ISN + 1 it acknowledges, as a SYN/ACK.
  Train t;
  Probe syn;
  syn.src = kSelf;
  syn.dst = kTarget;
  syn.sport = 51425;
  syn.dport = 443;
  syn.flags = kSyn;
  syn.seq = 475086401u;
  syn.role = Role::kMarker;
  t.probes = {syn};
  t.markers = {0};
  d.ts = 5;
  const TrainOutcome o = match_train(t, sent_all(t), {d}, kSelf);
  CHECK(o.probes[0].kind == ReplyKind::kSynAck);
  CHECK(o.probes[0].reply_ttl == 63);
  const std::vector<std::uint8_t> synack(frame.begin() + 14, frame.end());
  // Cut inside the options: the header says 24 bytes, 22 are there.
  std::vector<std::uint8_t> cut(synack.begin(), synack.end() - 2);
  CHECK(decode_ipv4(cut.data(), cut.size(), d) == DecodeStatus::kOk);  // fixed 20 bytes suffice
  std::vector<std::uint8_t> short_tcp(synack.begin(), synack.begin() + 36);
  CHECK(decode_ipv4(short_tcp.data(), short_tcp.size(), d) == DecodeStatus::kTruncated);

  // RST answering a bare ACK (ack 0x0badf00d): seq = that ack, no ACK flag.
  const std::vector<std::uint8_t> rst = {
      0x45, 0x00, 0x00, 0x28, 0x00, 0x00, 0x40, 0x00, 0x40, 0x06, 0,    0,
      0xc6, 0x12, 0x02, 0x02, 0xc6, 0x12, 0x01, 0x01,
      0x01, 0xbb, 0x9c, 0x40, 0x0b, 0xad, 0xf0, 0x0d, 0,    0,    0,    0,
      0x50, 0x04, 0,    0,    0,    0,    0,    0};
  Decoded r;
  REQUIRE(decode_ipv4(rst.data(), rst.size(), r) == DecodeStatus::kOk);
  CHECK(r.seq == 0x0badf00du);
  CHECK(r.tcp_flags == kRst);
}

TEST_CASE("open-port replies are matched by ack = ISN + 1, bare-ACK replies by seq = tag",
          "[match][open_port]") {
  SECTION("SYN/ACK") {
    const Train t = capacity_train(TargetMarker::kOpenSyn);
    const Probe& head = t.probes[t.markers[0]];
    const Probe& tail = t.probes[t.markers[1]];
    std::vector<Decoded> cap = {
        from_target(head, 9000, kSyn | kAck, 77, head.seq + 1),
        from_target(tail, 19000, kSyn | kAck, 99, tail.seq + 1),
        // The same SYN/ACK from another port or host is not ours.
        from_target(tail, 20000, kSyn | kAck, 99, tail.seq + 1)};
    cap.back().sport = 80;
    const TrainOutcome o = match_train(t, sent_all(t), cap, kSelf);
    CHECK(o.markers_lost == 0);
    CHECK(o.probes[t.markers[0]].kind == ReplyKind::kSynAck);
    CHECK(o.probes[t.markers[1]].reply == 19000);
    CHECK(o.duplicate_replies == 0);
  }
  SECTION("a SYN with payload: its SYN/ACK acks ISN + 1, a closed port's RST/ACK ISN + 1 + payload") {
    SynTrainParams sp;
    sp.flow = flow(TargetMarker::kOpenSyn);
    sp.drain = 0;
    sp.markers = 2;
    SeqAllocator seqs(11);
    const Train t = make_syn_train(sp, 1, seqs);
    const Probe& a = t.probes[t.markers[0]];
    const Probe& b = t.probes[t.markers[1]];
    REQUIRE(a.payload_len() == 1460);
    const std::vector<Decoded> cap = {from_target(a, 5000, kSyn | kAck, 1, a.seq + 1),
                                      from_target(b, 6000, kRst | kAck, 0, b.seq + 1 + 1460),
                                      // neither: a SYN/ACK acking the payload too
                                      from_target(b, 7000, kSyn | kAck, 1, b.seq + 1 + 1460)};
    const TrainOutcome o = match_train(t, sent_all(t), cap, kSelf);
    CHECK(o.probes[t.markers[0]].kind == ReplyKind::kSynAck);
    CHECK(o.probes[t.markers[1]].kind == ReplyKind::kRstAck);
    CHECK(o.probes[t.markers[1]].replies == 1);
  }
  SECTION("RST to a bare ACK") {
    const Train t = capacity_train(TargetMarker::kAck);
    const Probe& head = t.probes[t.markers[0]];
    const Probe& tail = t.probes[t.markers[1]];
    std::vector<Decoded> cap = {from_target(head, 9000, kRst, head.ack, 0),
                                from_target(tail, 19000, kRst, tail.ack + 2, 0)};  // not a tag
    TrainOutcome o = match_train(t, sent_all(t), cap, kSelf);
    CHECK(o.probes[t.markers[0]].kind == ReplyKind::kRst);
    CHECK(o.probes[t.markers[0]].reply == 9000);
    CHECK(o.probes[t.markers[1]].reply == 0);
    CHECK(o.markers_lost == 1);
    cap.push_back(from_target(tail, 19500, kRst, tail.ack, 0));
    o = match_train(t, sent_all(t), cap, kSelf);
    CHECK(o.markers_lost == 0);
    CHECK(is_tcp_answer(o.probes[t.markers[1]].kind));
  }
  SECTION("our closers are seen leaving; the kernel's RST with the same seq is not a reply") {
    const Train t = capacity_train(TargetMarker::kOpenSyn);
    const Probe& closer = t.probes.back();
    Decoded out;
    out.ts = 4000;
    out.src = kSelf;
    out.dst = kTarget;
    out.proto = 6;
    out.sport = closer.sport;
    out.dport = closer.dport;
    out.seq = closer.seq;
    out.tcp_flags = kRst;
    Decoded kernel = out;
    kernel.ts = 30000;
    const TrainOutcome o = match_train(t, sent_all(t), {out, kernel}, kSelf);
    CHECK(o.probes.back().left == 4000);
    CHECK(o.probes.back().reply == 0);
  }
}

TEST_CASE("send records keep the ack tag and the closer role", "[run_record][open_port]") {
  const Train t = capacity_train(TargetMarker::kAck);
  RunRecords rr;
  rr.add(5, send_record_body(t.probes[t.markers[1]]));
  const Train o = capacity_train(TargetMarker::kOpenSyn);
  rr.add(6, send_record_body(o.probes.back()));
  REQUIRE(rr.items.size() == 2);
  CHECK(rr.malformed == 0);
  CHECK(rr.items[0].sent.probe.ack == t.probes[t.markers[1]].ack);
  CHECK(rr.items[0].sent.probe.is_bare_ack());
  CHECK(rr.items[1].sent.probe.role == Role::kCloser);
  CHECK(rr.items[1].sent.probe.ip_len == kCloserBytes);
  // An older record (no ack field) still reads, with ack 0.
  std::vector<std::uint8_t> old = send_record_body(t.probes[0]);
  old.resize(old.size() - 4);
  RunRecords r2;
  r2.add(7, old);
  REQUIRE(r2.items.size() == 1);
  CHECK(r2.items[0].sent.probe.ack == 0);
}

// ---- discovery -------------------------------------------------------------

namespace {

PortAnswer ans(int port, TargetMarker kind, ReplyKind reply, int round = 0) {
  PortAnswer a;
  a.probe = {port, kind};
  a.round = round;
  a.reply = reply;
  a.from = kTarget;
  a.rtt_s = 0.001;
  return a;
}

// The answers of one round: the given replies, silence for the rest.
void answer_round(const DiscoveryPorts& ports, int round, std::vector<PortAnswer>& seen,
                  const std::vector<PortAnswer>& replies) {
  for (const PortProbe& p : discovery_round(ports, round, seen)) {
    PortAnswer a = ans(p.port, p.kind, ReplyKind::kNone, round);
    for (const PortAnswer& r : replies) {
      if (r.probe.port == p.port && r.probe.kind == p.kind) a = r, a.round = round;
    }
    seen.push_back(a);
  }
}

int count_kind(const std::vector<PortProbe>& ps, TargetMarker k) {
  return static_cast<int>(
      std::count_if(ps.begin(), ps.end(), [&](const PortProbe& p) { return p.kind == k; }));
}

}  // namespace

TEST_CASE("discovery rounds: closed candidates, then service ports, then bare ACKs",
          "[discovery][open_port]") {
  const DiscoveryPorts ports = discovery_ports(0);
  CHECK(discovery_rounds(1) == 3);
  CHECK(discovery_rounds(5) == 5);
  std::vector<PortAnswer> seen;
  const auto r0 = discovery_round(ports, 0, seen);
  CHECK(count_kind(r0, TargetMarker::kClosedSyn) == 4);
  CHECK(r0.size() == 4);
  const auto r1 = discovery_round(ports, 1, seen);
  CHECK(count_kind(r1, TargetMarker::kOpenSyn) == static_cast<int>(default_service_ports().size()));
  CHECK(count_kind(r1, TargetMarker::kAck) == 0);
  CHECK(r1[4].port == 443);  // closed candidates first, then the service ports in order
  const auto r2 = discovery_round(ports, 2, seen);
  CHECK(count_kind(r2, TargetMarker::kAck) == 4 + static_cast<int>(default_service_ports().size()));
  // A candidate that answered SYN/ACK is not asked with a SYN again.
  seen.push_back(ans(47391, TargetMarker::kClosedSyn, ReplyKind::kSynAck));
  CHECK(count_kind(discovery_round(ports, 1, seen), TargetMarker::kClosedSyn) == 3);

  const DiscoveryPorts user = discovery_ports(8443);
  CHECK(user.user_port);
  std::vector<PortAnswer> none;
  CHECK(discovery_round(user, 0, none).size() == 1);
  CHECK(discovery_round(user, 1, none).size() == 1);
  const auto u2 = discovery_round(user, 2, none);
  REQUIRE(u2.size() == 2);
  CHECK(u2[1].kind == TargetMarker::kAck);
  CHECK(u2[1].port == 8443);
}

TEST_CASE("discovery decision table", "[discovery][open_port]") {
  const DiscoveryPorts ports = discovery_ports(0);
  const int rounds = 3;
  std::vector<PortAnswer> seen;
  using C = DiscoveryChoice;

  SECTION("a closed port answers: closed_syn, open candidates skipped") {
    answer_round(ports, 0, seen,
                 {ans(47391, TargetMarker::kClosedSyn, ReplyKind::kSynAck),
                  ans(33871, TargetMarker::kClosedSyn, ReplyKind::kRstAck)});
    const C d = decide_marker(ports, seen, 0, rounds, kTarget);
    REQUIRE(d.outcome == C::kUse);
    CHECK(d.kind == TargetMarker::kClosedSyn);
    CHECK(d.port == 33871);
    CHECK(d.open_ports == std::vector<int>{47391});
    CHECK(seen[static_cast<std::size_t>(d.answer)].probe.port == 33871);
  }
  SECTION("closed ports dropped, 443 listens: open_syn in the second round") {
    answer_round(ports, 0, seen, {});
    CHECK(decide_marker(ports, seen, 0, rounds, kTarget).outcome == C::kAskAgain);
    answer_round(ports, 1, seen,
                 {ans(443, TargetMarker::kOpenSyn, ReplyKind::kSynAck),
                  ans(22, TargetMarker::kOpenSyn, ReplyKind::kSynAck)});
    const C d = decide_marker(ports, seen, 1, rounds, kTarget);
    REQUIRE(d.outcome == C::kUse);
    CHECK(d.kind == TargetMarker::kOpenSyn);
    CHECK(d.port == 443);
    CHECK(d.open_ports.empty());
  }
  SECTION("preference does not depend on the order of the answers") {
    seen.push_back(ans(443, TargetMarker::kOpenSyn, ReplyKind::kSynAck, 1));
    seen.push_back(ans(80, TargetMarker::kAck, ReplyKind::kRst, 2));
    seen.push_back(ans(33871, TargetMarker::kClosedSyn, ReplyKind::kRstAck, 2));
    C d = decide_marker(ports, seen, 2, rounds, kTarget);
    CHECK(d.kind == TargetMarker::kClosedSyn);
    seen.pop_back();
    d = decide_marker(ports, seen, 2, rounds, kTarget);
    CHECK(d.kind == TargetMarker::kOpenSyn);
    seen.erase(seen.begin());
    d = decide_marker(ports, seen, 2, rounds, kTarget);
    CHECK(d.kind == TargetMarker::kAck);
    CHECK(d.port == 80);
  }
  SECTION("SYNs dropped, ACKs answered: ack in the third round") {
    answer_round(ports, 0, seen, {});
    answer_round(ports, 1, seen, {});
    CHECK(decide_marker(ports, seen, 1, rounds, kTarget).outcome == C::kAskAgain);
    answer_round(ports, 2, seen,
                 {ans(58213, TargetMarker::kAck, ReplyKind::kRst),
                  ans(443, TargetMarker::kAck, ReplyKind::kRst)});
    const C d = decide_marker(ports, seen, 2, rounds, kTarget);
    REQUIRE(d.outcome == C::kUse);
    CHECK(d.kind == TargetMarker::kAck);
    CHECK(d.port == 58213);  // closed candidates' ACKs went first
  }
  SECTION("an RST/ACK to a bare ACK or a SYN/ACK to an ACK is nothing") {
    answer_round(ports, 0, seen, {});
    answer_round(ports, 1, seen, {});
    answer_round(ports, 2, seen, {ans(443, TargetMarker::kAck, ReplyKind::kRstAck)});
    const C d = decide_marker(ports, seen, 2, rounds, kTarget);
    CHECK(d.outcome == C::kFail);
  }
  SECTION("silence everywhere: target_filtered after the last round") {
    for (int r = 0; r < rounds; ++r) answer_round(ports, r, seen, {});
    const C d = decide_marker(ports, seen, rounds - 1, rounds, kTarget);
    REQUIRE(d.outcome == C::kFail);
    CHECK(d.code == "target_filtered");
    CHECK(d.message.find("198.18.2.2 is filtered") != std::string::npos);
    CHECK(d.message.find("443") != std::string::npos);
    CHECK(d.message.find("bare ACKs") != std::string::npos);
  }
  SECTION("host unreachable ends discovery at once") {
    PortAnswer a = ans(47391, TargetMarker::kClosedSyn, ReplyKind::kIcmp);
    a.icmp_type = 3;
    a.icmp_code = 1;
    a.from = kRouter;
    answer_round(ports, 0, seen, {a});
    const C d = decide_marker(ports, seen, 0, rounds, kTarget);
    REQUIRE(d.outcome == C::kFail);
    CHECK(d.code == "target_unreachable");
    CHECK(d.message.find("198.18.1.2 answered ICMP host unreachable") != std::string::npos);
  }
  SECTION("closed ports rejected (admin-prohibited): go on to the service ports") {
    PortAnswer a = ans(47391, TargetMarker::kClosedSyn, ReplyKind::kIcmp);
    a.icmp_type = 3;
    a.icmp_code = 13;
    answer_round(ports, 0, seen, {a});
    CHECK(decide_marker(ports, seen, 0, rounds, kTarget).outcome == C::kAskAgain);
    SECTION("and one listens") {
      answer_round(ports, 1, seen, {ans(443, TargetMarker::kOpenSyn, ReplyKind::kSynAck)});
      CHECK(decide_marker(ports, seen, 1, rounds, kTarget).kind == TargetMarker::kOpenSyn);
    }
    SECTION("or nothing does: filtered, with the ICMP reason") {
      answer_round(ports, 1, seen, {});
      answer_round(ports, 2, seen, {});
      const C d = decide_marker(ports, seen, 2, rounds, kTarget);
      REQUIRE(d.outcome == C::kFail);
      CHECK(d.code == "target_filtered");
      CHECK(d.message.find("administratively prohibited") != std::string::npos);
    }
  }
  SECTION("--port P that listens is used as open_syn at once") {
    const DiscoveryPorts user = discovery_ports(8443);
    answer_round(user, 0, seen, {ans(8443, TargetMarker::kClosedSyn, ReplyKind::kSynAck)});
    const C d = decide_marker(user, seen, 0, rounds, kTarget);
    REQUIRE(d.outcome == C::kUse);
    CHECK(d.kind == TargetMarker::kOpenSyn);
    CHECK(d.port == 8443);
  }
  SECTION("--port P silent everywhere names only P") {
    const DiscoveryPorts user = discovery_ports(8443);
    for (int r = 0; r < rounds; ++r) answer_round(user, r, seen, {});
    const C d = decide_marker(user, seen, rounds - 1, rounds, kTarget);
    REQUIRE(d.outcome == C::kFail);
    CHECK(d.message.find("port 8443") != std::string::npos);
  }
}
