#include "app/plumbing/own_qdisc.hpp"

#include <linux/gen_stats.h>
#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <vector>

namespace lw {

namespace {

// One attribute's payload, or empty.
struct Attr {
  const unsigned char* data = nullptr;
  std::size_t len = 0;
};

// Walks rtattrs in [p, p + len): f(type, attr).
void each_attr(const unsigned char* p, std::size_t len,
               const std::function<void(unsigned short, Attr)>& f) {
  while (len >= sizeof(rtattr)) {
    rtattr a;
    std::memcpy(&a, p, sizeof a);
    if (a.rta_len < sizeof(rtattr) || a.rta_len > len) return;
    f(static_cast<unsigned short>(a.rta_type & NLA_TYPE_MASK),
      {p + RTA_LENGTH(0), a.rta_len - RTA_LENGTH(0)});
    const std::size_t step = RTA_ALIGN(a.rta_len);
    if (step >= len) return;
    p += step;
    len -= step;
  }
}

template <typename T>
bool attr_as(const Attr& a, T& out) {
  if (a.len < sizeof(T)) return false;
  std::memcpy(&out, a.data, sizeof(T));
  return true;
}

QdiscRate rate_of(const tc_ratespec& r, std::uint64_t rate64) {
  QdiscRate q;
  q.bytes_per_s = rate64 > 0 ? static_cast<double>(rate64) : static_cast<double>(r.rate);
  q.overhead = r.overhead;
  q.linklayer = (r.linklayer & TC_LINKLAYER_MASK) == TC_LINKLAYER_ATM ? 2 : 1;
  return q;
}

class Netlink {
 public:
  Netlink() {
    fd_ = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd_ < 0) return;
    timeval tv{1, 0};  // never hang on a kernel that will not answer
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~Netlink() {
    if (fd_ >= 0) close(fd_);
  }
  Netlink(const Netlink&) = delete;
  Netlink& operator=(const Netlink&) = delete;
  bool ok() const { return fd_ >= 0; }

  // A dump of `type` (RTM_GETQDISC, RTM_GETTCLASS, RTM_GETTFILTER) for
  // `ifindex` (and `parent`, for filters): f(tcmsg, attributes) per answer.
  bool dump(int type, int ifindex, std::uint32_t parent,
            const std::function<void(const tcmsg&, const unsigned char*, std::size_t)>& f) {
    struct {
      nlmsghdr h;
      tcmsg t;
    } req{};
    req.h.nlmsg_len = NLMSG_LENGTH(sizeof(tcmsg));
    req.h.nlmsg_type = static_cast<unsigned short>(type);
    req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    req.h.nlmsg_seq = ++seq_;
    req.t.tcm_family = AF_UNSPEC;
    req.t.tcm_ifindex = ifindex;
    req.t.tcm_parent = parent;
    if (send(fd_, &req, req.h.nlmsg_len, 0) < 0) return false;
    std::vector<unsigned char> buf(64 * 1024);
    for (int reads = 0; reads < 1000; ++reads) {
      const ssize_t n = recv(fd_, buf.data(), buf.size(), 0);
      if (n <= 0) return false;
      std::size_t left = static_cast<std::size_t>(n);
      const unsigned char* p = buf.data();
      while (left >= sizeof(nlmsghdr)) {
        nlmsghdr h;
        std::memcpy(&h, p, sizeof h);
        if (h.nlmsg_len < sizeof(nlmsghdr) || h.nlmsg_len > left) return false;
        if (h.nlmsg_seq == seq_) {
          if (h.nlmsg_type == NLMSG_DONE) return true;
          if (h.nlmsg_type == NLMSG_ERROR) return false;
          if (h.nlmsg_len >= NLMSG_LENGTH(sizeof(tcmsg))) {
            tcmsg t;
            std::memcpy(&t, p + NLMSG_HDRLEN, sizeof t);
            const std::size_t off = NLMSG_LENGTH(sizeof(tcmsg));
            if (t.tcm_ifindex == ifindex) f(t, p + NLMSG_ALIGN(off), h.nlmsg_len - NLMSG_ALIGN(off));
          }
        }
        const std::size_t step = NLMSG_ALIGN(h.nlmsg_len);
        if (step >= left) break;
        p += step;
        left -= step;
      }
    }
    return false;
  }

 private:
  int fd_ = -1;
  unsigned seq_ = 0;
};

}  // namespace

QdiscConfig read_qdisc_config(const std::string& ifname) {
  QdiscConfig q;
  const int ifindex = static_cast<int>(if_nametoindex(ifname.c_str()));
  if (ifindex <= 0) return q;
  Netlink nl;
  if (!nl.ok()) return q;
  std::string kind;
  bool root_seen = false;
  const bool dumped = nl.dump(RTM_GETQDISC, ifindex, 0, [&](const tcmsg& t, const unsigned char* p,
                                                            std::size_t len) {
    if (t.tcm_parent != TC_H_ROOT || root_seen) return;
    root_seen = true;
    q.root_handle = t.tcm_handle;
    tc_tbf_qopt tbf{};
    std::uint64_t rate64 = 0;
    bool tbf_parms = false;
    each_attr(p, len, [&](unsigned short type, Attr a) {
      if (type == TCA_KIND && a.len > 0) {
        kind.assign(reinterpret_cast<const char*>(a.data), strnlen(reinterpret_cast<const char*>(a.data), a.len));
      } else if (type == TCA_STAB) {
        q.size_table = true;
      } else if (type == TCA_OPTIONS) {
        each_attr(a.data, a.len, [&](unsigned short o, Attr v) {
          if (o == TCA_TBF_PARMS) tbf_parms = attr_as(v, tbf);
          if (o == TCA_TBF_RATE64) attr_as(v, rate64);
          if (o == TCA_HTB_INIT) {
            tc_htb_glob g{};
            if (attr_as(v, g)) q.htb_default = g.defcls;
          }
        });
      }
    });
    // (TCA_TBF_PARMS and TCA_HTB_INIT share a number: only one is the root's.)
    if (kind != "htb") q.htb_default = 0;
    if (kind == "tbf" && tbf_parms) q.tbf_rate = rate_of(tbf.rate, rate64);
  });
  if (!dumped) return QdiscConfig{};
  q.root_kind = root_seen ? (kind.empty() ? "unknown" : kind) : "none";
  if (q.root_kind != "htb") return q;
  nl.dump(RTM_GETTCLASS, ifindex, 0, [&](const tcmsg& t, const unsigned char* p, std::size_t len) {
    HtbClass c;
    c.handle = t.tcm_handle;
    c.parent = t.tcm_parent;
    tc_htb_opt opt{};
    bool have = false;
    std::uint64_t rate64 = 0, ceil64 = 0;
    bool htb = false;
    each_attr(p, len, [&](unsigned short type, Attr a) {
      if (type == TCA_KIND) htb = a.len >= 3 && std::memcmp(a.data, "htb", 3) == 0;
      if (type != TCA_OPTIONS) return;
      each_attr(a.data, a.len, [&](unsigned short o, Attr v) {
        if (o == TCA_HTB_PARMS) have = attr_as(v, opt);
        if (o == TCA_HTB_RATE64) attr_as(v, rate64);
        if (o == TCA_HTB_CEIL64) attr_as(v, ceil64);
      });
    });
    if (!htb || !have) return;
    c.rate = rate_of(opt.rate, rate64);
    c.ceil = rate_of(opt.ceil, ceil64);
    q.classes.push_back(c);
  });
  // Filters anywhere under the root classify: ask the root and each class.
  std::vector<std::uint32_t> parents{q.root_handle};
  for (const HtbClass& c : q.classes) parents.push_back(c.handle);
  for (const std::uint32_t parent : parents) {
    bool any = false;
    if (!nl.dump(RTM_GETTFILTER, ifindex, parent,
                 [&](const tcmsg&, const unsigned char*, std::size_t) { any = true; })) {
      any = true;  // could not tell: assume classified
    }
    if (any) {
      q.filters = true;
      break;
    }
  }
  return q;
}

std::int64_t read_root_backlog(int ifindex) {
  if (ifindex <= 0) return -1;
  Netlink nl;
  if (!nl.ok()) return -1;
  std::int64_t backlog = -1;
  bool root_seen = false;
  const bool dumped = nl.dump(RTM_GETQDISC, ifindex, 0, [&](const tcmsg& t, const unsigned char* p,
                                                            std::size_t len) {
    if (t.tcm_parent != TC_H_ROOT || root_seen) return;
    root_seen = true;
    std::int64_t legacy = -1;
    each_attr(p, len, [&](unsigned short type, Attr a) {
      if (type == TCA_STATS2) {
        each_attr(a.data, a.len, [&](unsigned short s, Attr v) {
          gnet_stats_queue q{};
          if (s == TCA_STATS_QUEUE && attr_as(v, q)) backlog = q.backlog;
        });
      } else if (type == TCA_STATS) {
        tc_stats st{};
        if (attr_as(a, st)) legacy = st.backlog;
      }
    });
    if (backlog < 0) backlog = legacy;
  });
  return dumped ? backlog : -1;
}

}  // namespace lw
