#include "match/match.hpp"

#include <unordered_map>

namespace lw {

const char* reply_kind_name(ReplyKind k) {
  switch (k) {
    case ReplyKind::kNone:
      return "none";
    case ReplyKind::kRstAck:
      return "rst-ack";
    case ReplyKind::kSynAck:
      return "syn-ack";
    case ReplyKind::kIcmp:
      return "icmp";
    case ReplyKind::kOther:
      return "other";
    case ReplyKind::kRst:
      return "rst";
  }
  return "?";
}

namespace {

void note_reply(ProbeOutcome& o, const Decoded& d, ReplyKind kind) {
  ++o.replies;
  if (o.replies > 1) return;  // keep the first arrival
  o.reply = d.ts;
  o.kind = kind;
  o.reply_from = d.src;
  o.reply_ttl = d.ttl;
  o.reply_ip_id = d.ip_id;
  o.icmp_type = d.icmp_type;
  o.icmp_code = d.icmp_code;
  o.icmp_kind = d.icmp_kind;
  o.icmp_mtu = d.icmp_mtu;
}

}  // namespace

TrainOutcome match_train(const Train& train, const std::vector<SendRecord>& sent,
                         const std::vector<Decoded>& captured, const IpAddr& self) {
  TrainOutcome out;
  out.probes.resize(train.probes.size());
  if (train.probes.empty()) return out;

  // by_ack: what a closed port's RST/ACK acknowledges; by_synack: what a
  // listening port's SYN/ACK does (the same for SYNs without payload); by_tag:
  // the ack number of bare ACKs, which their RST carries as its seq.
  std::unordered_map<std::uint32_t, std::size_t> by_seq, by_ack, by_synack, by_tag;
  for (std::size_t i = 0; i < train.probes.size(); ++i) {
    const Probe& p = train.probes[i];
    by_seq.emplace(p.seq, i);
    if (p.flags & kSyn) {
      by_ack.emplace(p.expected_ack(), i);
      by_synack.emplace(p.expected_synack_ack(), i);
    }
    if (p.is_bare_ack()) by_tag.emplace(p.ack, i);
    if (i < sent.size()) {
      out.probes[i].sent = sent[i].sent ? sent[i].actual_real : 0;
      if (!sent[i].sent) out.unsent = true;
    } else {
      out.unsent = true;
    }
  }

  // Every lookup is by sequence/ack number, then checked against that probe's own
  // addresses and ports (discovery probes differ in destination port).
  for (const Decoded& d : captured) {
    if (d.proto == kProtoTcp && d.src == self) {
      auto it = by_seq.find(d.seq);
      if (it == by_seq.end()) continue;
      const Probe& p = train.probes[it->second];
      if (d.dst == p.dst && d.sport == p.sport && d.dport == p.dport &&
          out.probes[it->second].left == 0) {
        out.probes[it->second].left = d.ts;
      }
    } else if (d.proto == kProtoTcp && d.dst == self && (d.tcp_flags & kAck)) {
      const bool synack = (d.tcp_flags & (kSyn | kRst)) == kSyn;
      const auto& keys = synack ? by_synack : by_ack;
      auto it = keys.find(d.ack);
      if (it == keys.end()) continue;
      const Probe& p = train.probes[it->second];
      if (d.src != p.dst || d.sport != p.dport || d.dport != p.sport) continue;
      ReplyKind kind = ReplyKind::kOther;
      if ((d.tcp_flags & kRst) != 0) {
        kind = ReplyKind::kRstAck;
      } else if (synack) {
        kind = ReplyKind::kSynAck;
      }
      note_reply(out.probes[it->second], d, kind);
    } else if (d.proto == kProtoTcp && d.dst == self && (d.tcp_flags & kRst)) {
      // No ACK flag: a reset answering a segment that carried an ACK.
      auto it = by_tag.find(d.seq);
      if (it == by_tag.end()) continue;
      const Probe& p = train.probes[it->second];
      if (d.src != p.dst || d.sport != p.dport || d.dport != p.sport) continue;
      note_reply(out.probes[it->second], d, ReplyKind::kRst);
    } else if (is_icmp_proto(d.proto) && d.dst == self && d.quote.present &&
               d.quote.src == self && d.quote.proto == kProtoTcp) {
      auto it = by_seq.find(d.quote.seq);
      if (it == by_seq.end()) continue;
      const Probe& p = train.probes[it->second];
      if (d.quote.dst == p.dst && d.quote.sport == p.sport && d.quote.dport == p.dport) {
        note_reply(out.probes[it->second], d, ReplyKind::kIcmp);
      }
    }
  }

  Nanos last = 0;
  for (int m : train.markers) {
    const ProbeOutcome& o = out.probes[m];
    if (o.reply == 0) {
      ++out.markers_lost;
      continue;
    }
    if (o.reply < last) out.reordered = true;
    last = o.reply;
  }
  for (const auto& o : out.probes) {
    if (o.replies > 1) out.duplicate_replies += o.replies - 1;
  }
  return out;
}

}  // namespace lw
