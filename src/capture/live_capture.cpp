#include "capture/live_capture.hpp"

#include <pcap/pcap.h>
#include <poll.h>

#include "capture/run_record.hpp"
#include "linkwidth/error.hpp"

namespace lw {

namespace {

struct DrainCtx {
  std::vector<Decoded>* out;
  int dlt;
  unsigned* undecodable;
  bool nano;
  pcap_dumper_t* dumper;
};

void on_packet(u_char* user, const pcap_pkthdr* h, const u_char* bytes) {
  auto* ctx = reinterpret_cast<DrainCtx*>(user);
  if (ctx->dumper) pcap_dump(reinterpret_cast<u_char*>(ctx->dumper), h, bytes);
  Decoded d;
  if (decode_frame(ctx->dlt, bytes, h->caplen, d) != DecodeStatus::kOk) {
    ++*ctx->undecodable;
    return;
  }
  d.ts = static_cast<Nanos>(h->ts.tv_sec) * kSec +
         static_cast<Nanos>(h->ts.tv_usec) * (ctx->nano ? 1 : 1000);
  ctx->out->push_back(d);
}

void check(pcap_t* p, int rc, const std::string& what, const std::string& ifname) {
  if (rc >= 0) return;
  std::string msg = what + "(" + ifname + "): " + pcap_geterr(p);
  const bool perm = rc == PCAP_ERROR_PERM_DENIED;
  pcap_close(p);
  if (perm) {
    throw Error("capture", msg + " (needs root or CAP_NET_RAW+CAP_NET_ADMIN)", "privilege",
                ExitCode::kPrivilege);
  }
  throw Error("capture", msg);
}

}  // namespace

LiveCapture::LiveCapture(const std::string& ifname, const std::string& filter, int snaplen,
                         int buffer_bytes) {
  char errbuf[PCAP_ERRBUF_SIZE] = {0};
  pcap_t* p = pcap_create(ifname.c_str(), errbuf);
  if (!p) throw Error("capture", "pcap_create(" + ifname + "): " + errbuf);
  pcap_set_snaplen(p, snaplen);
  pcap_set_promisc(p, 0);
  pcap_set_timeout(p, 1);  // ms: block delivery latency, not timestamp accuracy
  pcap_set_buffer_size(p, buffer_bytes);
  pcap_set_tstamp_precision(p, PCAP_TSTAMP_PRECISION_NANO);
  const int rc = pcap_activate(p);
  if (rc == PCAP_ERROR_PERM_DENIED) check(p, rc, "pcap_activate", ifname);
  if (rc < 0) {
    std::string msg = std::string("pcap_activate(") + ifname + "): " + pcap_statustostr(rc) + " " +
                      pcap_geterr(p);
    pcap_close(p);
    throw Error("capture", msg);
  }
  bpf_program prog{};
  check(p, pcap_compile(p, &prog, filter.c_str(), 1, PCAP_NETMASK_UNKNOWN), "pcap_compile", ifname);
  const int frc = pcap_setfilter(p, &prog);
  pcap_freecode(&prog);
  check(p, frc, "pcap_setfilter", ifname);
  check(p, pcap_setnonblock(p, 1, errbuf), "pcap_setnonblock", ifname);
  p_ = p;
  dlt_ = pcap_datalink(p);
  fd_ = pcap_get_selectable_fd(p);
}

LiveCapture::~LiveCapture() {
  if (dumper_) pcap_dump_close(dumper_);
  if (p_) pcap_close(p_);
}

void LiveCapture::save_to(const std::string& path) {
  pcap_dumper_t* d = pcap_dump_open(p_, path.c_str());
  if (!d) {
    throw Error("capture", "cannot write --save-pcap " + path + ": " + pcap_geterr(p_),
                "unwritable_file", ExitCode::kUsage);
  }
  if (dumper_) pcap_dump_close(dumper_);
  dumper_ = d;
}

void LiveCapture::save_record(Nanos ts, const std::vector<std::uint8_t>& body) {
  if (!dumper_) return;
  const std::vector<std::uint8_t> frame = record_frame(dlt_, body);
  if (frame.empty()) return;
  pcap_pkthdr h{};
  h.ts.tv_sec = static_cast<time_t>(ts / kSec);
  // The file carries the capture's precision: tv_usec holds ns in a ns file.
  const bool nano = pcap_get_tstamp_precision(p_) == PCAP_TSTAMP_PRECISION_NANO;
  h.ts.tv_usec = static_cast<suseconds_t>(ts % kSec / (nano ? 1 : 1000));
  h.caplen = h.len = static_cast<bpf_u_int32>(frame.size());
  pcap_dump(reinterpret_cast<u_char*>(dumper_), &h, frame.data());
}

std::size_t LiveCapture::drain(std::vector<Decoded>& out) {
  const std::size_t before = out.size();
  DrainCtx ctx{&out, dlt_, &undecodable_,
               pcap_get_tstamp_precision(p_) == PCAP_TSTAMP_PRECISION_NANO, dumper_};
  for (;;) {
    const int n = pcap_dispatch(p_, -1, on_packet, reinterpret_cast<u_char*>(&ctx));
    if (n <= 0) break;
  }
  return out.size() - before;
}

void LiveCapture::wait(Nanos timeout) {
  if (fd_ < 0) {
    sleep_until(mono_now() + timeout);
    return;
  }
  pollfd pfd{fd_, POLLIN, 0};
  // Round up to whole ms; the 1 ms buffer timeout bounds the extra latency.
  const int ms = static_cast<int>((timeout + kMs - 1) / kMs);
  poll(&pfd, 1, ms < 1 ? 1 : ms);
}

CaptureStats LiveCapture::stats() {
  CaptureStats s;
  pcap_stat st{};
  if (pcap_stats(p_, &st) == 0) {
    s.received = st.ps_recv;
    s.dropped = st.ps_drop;
    s.if_dropped = st.ps_ifdrop;
  }
  s.undecodable = undecodable_;
  return s;
}

}  // namespace lw
