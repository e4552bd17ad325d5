// lw_delay: the lab's delay element (not part of the tool). The kernel has no
// netem, so this bridges two interfaces at layer 2 and holds every frame for
// a fixed one-way delay per direction:
//
//   lw_delay IF_A IF_B FWD_MS REV_MS [--limit BYTES] [--margin-us US]
//            [--rt PRIO] [--max-frame BYTES]
//
// Frames arriving on IF_A leave on IF_B FWD_MS later; frames arriving on IF_B
// leave on IF_A REV_MS later (0..1000 ms, fractions allowed). It runs in a
// namespace of its own between two veths and carries no IP address, so it is
// invisible to IP: no extra hop, no TTL decrement, ARP passes through.
//
// Why AF_PACKET and not TUN: TUN is a layer-3 device, so a TUN delay node is a
// router hop (TTL - 1, an extra ICMP source) that every hop-count test would
// have to know about; an AF_PACKET bridge is a piece of wire.
//
// Fidelity (results/delay_fidelity.md): the arrival time of each frame is the
// kernel's receive timestamp (SO_TIMESTAMPNS, CLOCK_REALTIME, taken when the
// peer veth handed the frame over), not a user-space clock read after recv, so
// a late read does not move the departure. Each frame leaves at arrival +
// delay: the sender sleeps to MARGIN before the deadline (ppoll, hrtimer) and
// spins the rest. One thread per direction, SCHED_FIFO when allowed (the
// wake-up error of a CFS thread on the busy 2-core lab VM is milliseconds at
// the 99th percentile; FIFO's is ~30 us). The margin adapts to the wake-up
// lateness actually seen (its recent maximum + 5 us, within 10 us..MARGIN),
// so the spin, the CPU this burns, stays small.
//
// The socket buffer is drained between departures, not on every arrival:
// nothing that arrives later can be due earlier than the queue's head
// (arrivals are in order and the delay is fixed), and the kernel timestamp
// keeps its arrival time exact however late it is read. A sleep lasts at most
// 2 ms so the socket buffer never holds more than 2 ms of arrivals.
//
// Memory: a byte ring of --limit bytes per direction (default 16 MB); a frame
// that does not fit is dropped and counted (a full queue, as a router would).
// SIGTERM/SIGINT: both threads stop, the queued frames are discarded, one JSON
// line of counters goes to stdout, exit 0. "ready" is printed to stdout once
// both interfaces are bound.
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

namespace {

using Nanos = int64_t;

Nanos now_real() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);  // the clock of the kernel's skb timestamps
  return static_cast<Nanos>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// One turn of a spin. The two directions' threads share a CPU in the lab
// (SCHED_FIFO, same priority), and a FIFO thread that spins is never
// preempted by its peer: a train forwarded back to back (a millisecond of
// spinning) held every reply due meanwhile until the train was out. At 1 ms
// RTT that made the head marker's reply late and the capacity read +6..+9%
// high. sched_yield() hands the CPU to the peer if it is runnable and returns
// at once (about 1 us) if not.
void spin_turn() {
  sched_yield();
}

// A byte ring of variable-length records: 16-byte header + frame, padded to
// 16. Single producer and consumer (the same thread), so no locking.
class Ring {
 public:
  explicit Ring(std::size_t cap) : buf_(cap) {}

  bool push(Nanos deadline, const uint8_t* data, uint32_t len) {
    const std::size_t need = kHdr + ((len + 15u) & ~std::size_t{15});
    const std::size_t cap = buf_.size();
    if (count_ == 0) head_ = tail_ = 0;
    std::size_t at;
    if (tail_ > head_ || count_ == 0) {  // free: [tail, cap) and [0, head)
      if (cap - tail_ >= need) {
        at = tail_;
      } else if (head_ >= need) {
        if (cap - tail_ >= kHdr) put_hdr(tail_, 0, kWrap);
        at = 0;
      } else {
        return false;
      }
    } else if (tail_ < head_ && head_ - tail_ >= need) {  // free: [tail, head)
      at = tail_;
    } else {
      return false;
    }
    put_hdr(at, deadline, len);
    std::memcpy(&buf_[at + kHdr], data, len);
    tail_ = at + need;
    ++count_;
    bytes_ += len;
    return true;
  }

  bool empty() const { return count_ == 0; }
  std::size_t bytes() const { return bytes_; }

  // The head record (call only when !empty()).
  Nanos front(const uint8_t** data, uint32_t* len) {
    skip_wrap();
    Nanos d;
    std::memcpy(&d, &buf_[head_], 8);
    std::memcpy(len, &buf_[head_ + 8], 4);
    *data = &buf_[head_ + kHdr];
    return d;
  }

  void pop() {
    skip_wrap();
    uint32_t len;
    std::memcpy(&len, &buf_[head_ + 8], 4);
    head_ += kHdr + ((len + 15u) & ~std::size_t{15});
    --count_;
    bytes_ -= len;
  }

  void clear() { count_ = 0, bytes_ = 0, head_ = tail_ = 0; }

 private:
  static constexpr std::size_t kHdr = 16;
  static constexpr uint32_t kWrap = 0xffffffffu;

  void put_hdr(std::size_t at, Nanos d, uint32_t len) {
    std::memcpy(&buf_[at], &d, 8);
    std::memcpy(&buf_[at + 8], &len, 4);
  }
  void skip_wrap() {
    if (buf_.size() - head_ < kHdr) {
      head_ = 0;
      return;
    }
    uint32_t len;
    std::memcpy(&len, &buf_[head_ + 8], 4);
    if (len == kWrap) head_ = 0;
  }

  std::vector<uint8_t> buf_;
  std::size_t head_ = 0, tail_ = 0, count_ = 0, bytes_ = 0;
};

struct Options {
  std::string if_a, if_b;
  Nanos delay[2] = {0, 0};  // [0]: A->B, [1]: B->A
  std::size_t limit = 16u << 20;
  Nanos margin = 60'000;
  int rt_prio = 20;
  std::size_t max_frame = 9216 + 18;
};

struct Counters {
  uint64_t forwarded = 0, dropped_queue = 0, dropped_oversize = 0, send_errors = 0,
           no_timestamp = 0, late_10us = 0, late_100us = 0, wakeups = 0;
  Nanos max_late = 0, max_margin = 0, min_margin = INT64_MAX;
  std::size_t max_queue_bytes = 0;
};

std::atomic<bool> g_stop{false};

int open_rx(int ifindex) {
  const int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK, 0);  // protocol 0: nothing yet
  if (fd < 0) return -1;
  const int one = 1;
  // Our own transmissions on this interface are not arrivals.
  if (setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) < 0) return -1;
  if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one) < 0) return -1;
  const int rcvbuf = 32 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) < 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(ETH_P_ALL);
  sll.sll_ifindex = ifindex;
  if (bind(fd, reinterpret_cast<sockaddr*>(&sll), sizeof sll) < 0) return -1;
  packet_mreq mr{};
  mr.mr_ifindex = ifindex;
  mr.mr_type = PACKET_MR_PROMISC;
  if (setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof mr) < 0) return -1;
  return fd;
}

int open_tx(int ifindex) {
  const int fd = socket(AF_PACKET, SOCK_RAW, 0);  // receives nothing
  if (fd < 0) return -1;
  const int one = 1;
  // Straight to the veth's xmit: no qdisc to queue behind.
  setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one);
  const int sndbuf = 4 << 20;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof sndbuf);
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_ifindex = ifindex;
  if (bind(fd, reinterpret_cast<sockaddr*>(&sll), sizeof sll) < 0) return -1;
  return fd;
}

// One direction: frames from rx_fd, held `delay`, out of tx_fd.
class Direction {
 public:
  Direction(int rx_fd, int tx_fd, int stop_fd, Nanos delay, const Options& o)
      : rx_(rx_fd), tx_(tx_fd), stop_(stop_fd), delay_(delay), max_margin_(o.margin),
        margin_(o.margin), ring_(o.limit), max_frame_(o.max_frame) {
    for (int i = 0; i < kBatch; ++i) {
      bufs_[i].resize(max_frame_ + 1);
      iov_[i] = {bufs_[i].data(), bufs_[i].size()};
    }
  }

  void run() {
    while (!g_stop.load(std::memory_order_relaxed)) {
      send_due();
      if (!ring_.empty()) {
        const Nanos wait = head_deadline() - now_real();
        if (wait <= margin_ + kDrainSlot) {  // spin (send_due waits out the rest)
          spin_turn();
          continue;
        }
        // Arrivals in small batches (a read of 32 full frames takes tens of
        // us and would overrun the head's deadline), while there is time.
        if (drain(kSmallBatch) > 0) continue;
        sleep_until(head_deadline() - margin_, false);
      } else if (drain(kBatch) == 0) {
        sleep_until(0, true);
      }
    }
    ring_.clear();
  }

  const Counters& counters() const { return c_; }

 private:
  static constexpr int kBatch = 32;
  static constexpr int kSmallBatch = 4;
  static constexpr Nanos kDrainSlot = 15'000;  // enough for kSmallBatch frames
  static constexpr Nanos kMaxSleep = 2'000'000;  // bounds the socket buffer's backlog

  Nanos head_deadline() {
    const uint8_t* d;
    uint32_t len;
    return ring_.front(&d, &len);
  }

  // Sends every frame whose deadline is at most `margin_` away, spinning up
  // to each deadline.
  void send_due() {
    while (!ring_.empty()) {
      const uint8_t* data;
      uint32_t len;
      const Nanos deadline = ring_.front(&data, &len);
      Nanos now = now_real();
      if (deadline - now > margin_) return;
      while (now < deadline) {
        spin_turn();
        now = now_real();
      }
      const Nanos late = now - deadline;
      c_.max_late = std::max(c_.max_late, late);
      if (late > 10'000) ++c_.late_10us;
      if (late > 100'000) ++c_.late_100us;
      if (send(tx_, data, len, 0) < 0) {
        ++c_.send_errors;
      } else {
        ++c_.forwarded;
      }
      ring_.pop();
    }
  }

  // Reads up to `max` frames without blocking; returns how many.
  int drain(int max) {
    mmsghdr msgs[kBatch]{};
    alignas(cmsghdr) static thread_local char ctrl[kBatch][64];
    for (int i = 0; i < max; ++i) {
      msgs[i].msg_hdr.msg_iov = &iov_[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
      msgs[i].msg_hdr.msg_control = ctrl[i];
      msgs[i].msg_hdr.msg_controllen = sizeof ctrl[i];
    }
    const int n = recvmmsg(rx_, msgs, static_cast<unsigned>(max), MSG_DONTWAIT | MSG_TRUNC,
                           nullptr);
    if (n <= 0) return 0;
    for (int i = 0; i < n; ++i) {
      const std::size_t len = msgs[i].msg_len;
      if (len > max_frame_ || (msgs[i].msg_hdr.msg_flags & MSG_TRUNC)) {
        ++c_.dropped_oversize;
        continue;
      }
      Nanos arrival = -1;
      for (cmsghdr* cm = CMSG_FIRSTHDR(&msgs[i].msg_hdr); cm;
           cm = CMSG_NXTHDR(&msgs[i].msg_hdr, cm)) {
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_TIMESTAMPNS) {
          timespec ts;
          std::memcpy(&ts, CMSG_DATA(cm), sizeof ts);
          arrival = static_cast<Nanos>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
        }
      }
      if (arrival < 0) {
        ++c_.no_timestamp;
        arrival = now_real();
      }
      if (!ring_.push(arrival + delay_, bufs_[i].data(), static_cast<uint32_t>(len))) {
        ++c_.dropped_queue;
      }
    }
    c_.max_queue_bytes = std::max(c_.max_queue_bytes, ring_.bytes());
    return n;
  }

  // Sleeps until `until` (REALTIME ns; 0 = no deadline) or at most kMaxSleep,
  // or until an arrival when `wake_on_rx`, or until stop. After a timed wake
  // the margin follows the lateness seen: recent max + 5 us.
  void sleep_until(Nanos until, bool wake_on_rx) {
    pollfd p[2] = {{stop_, POLLIN, 0}, {rx_, POLLIN, 0}};
    const Nanos now = now_real();
    Nanos rel = until == 0 ? -1 : until - now;
    if (rel > kMaxSleep) rel = kMaxSleep;
    const bool timed = until != 0 && rel == until - now;
    if (rel < 0 && until != 0) rel = 0;
    timespec ts{static_cast<time_t>(rel / 1'000'000'000), static_cast<long>(rel % 1'000'000'000)};
    ++c_.wakeups;
    ppoll(p, wake_on_rx ? 2 : 1, rel < 0 ? nullptr : &ts, nullptr);
    if (timed) {
      const Nanos late = now_real() - until;
      // decaying maximum of the wake-up lateness (about 1/64 per wake)
      late_est_ = std::max(late, late_est_ - late_est_ / 64);
      margin_ = std::clamp<Nanos>(late_est_ + 5'000, 10'000, max_margin_);
      c_.max_margin = std::max(c_.max_margin, margin_);
      c_.min_margin = std::min(c_.min_margin, margin_);
    }
  }

  int rx_, tx_, stop_;
  Nanos delay_, max_margin_, margin_, late_est_ = 0;
  Ring ring_;
  std::size_t max_frame_;
  std::vector<uint8_t> bufs_[kBatch];
  iovec iov_[kBatch];
  Counters c_;
};

int usage(const char* why) {
  std::fprintf(stderr,
               "lw_delay: %s\nusage: lw_delay IF_A IF_B FWD_MS REV_MS [--limit BYTES] "
               "[--margin-us US] [--rt PRIO] [--max-frame BYTES]\n",
               why);
  return 2;
}

bool parse_ms(const char* s, Nanos* out) {
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (end == s || *end != '\0' || !(v >= 0) || v > 1000) return false;
  *out = static_cast<Nanos>(v * 1e6 + 0.5);
  return true;
}

void print_counters(const char* name, const Counters& c, Nanos delay) {
  std::printf(
      "\"%s\":{\"delay_ns\":%" PRId64 ",\"forwarded\":%" PRIu64 ",\"dropped_queue\":%" PRIu64
      ",\"dropped_oversize\":%" PRIu64 ",\"send_errors\":%" PRIu64 ",\"no_timestamp\":%" PRIu64
      ",\"late_over_10us\":%" PRIu64 ",\"late_over_100us\":%" PRIu64 ",\"max_late_ns\":%" PRId64
      ",\"wakeups\":%" PRIu64 ",\"margin_ns_min\":%" PRId64 ",\"margin_ns_max\":%" PRId64
      ",\"max_queue_bytes\":%zu}",
      name, delay, c.forwarded, c.dropped_queue, c.dropped_oversize, c.send_errors,
      c.no_timestamp, c.late_10us, c.late_100us, c.max_late, c.wakeups,
      c.min_margin == INT64_MAX ? 0 : c.min_margin, c.max_margin, c.max_queue_bytes);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) return usage("four arguments expected");
  Options o;
  o.if_a = argv[1];
  o.if_b = argv[2];
  if (!parse_ms(argv[3], &o.delay[0]) || !parse_ms(argv[4], &o.delay[1]))
    return usage("FWD_MS and REV_MS must be 0..1000");
  for (int i = 5; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) return usage(("missing value for " + k).c_str());
    const double v = std::atof(argv[++i]);
    if (k == "--limit" && v >= 65536 && v <= 4e9) {
      o.limit = static_cast<std::size_t>(v);
    } else if (k == "--margin-us" && v >= 10 && v <= 5000) {
      o.margin = static_cast<Nanos>(v * 1000);
    } else if (k == "--rt" && v >= 0 && v <= 99) {
      o.rt_prio = static_cast<int>(v);
    } else if (k == "--max-frame" && v >= 64 && v <= 65535) {
      o.max_frame = static_cast<std::size_t>(v);
    } else {
      return usage(("bad option or value: " + k + " " + argv[i]).c_str());
    }
  }
  const int idx_a = static_cast<int>(if_nametoindex(o.if_a.c_str()));
  const int idx_b = static_cast<int>(if_nametoindex(o.if_b.c_str()));
  if (idx_a == 0 || idx_b == 0 || idx_a == idx_b) return usage("IF_A and IF_B must be two interfaces");

  // Signals go to the main thread only (sigwait below); workers see g_stop
  // through an eventfd in every poll.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  const int rx_a = open_rx(idx_a), rx_b = open_rx(idx_b);
  const int tx_a = open_tx(idx_a), tx_b = open_tx(idx_b);
  const int stop_fd = eventfd(0, EFD_NONBLOCK);
  if (rx_a < 0 || rx_b < 0 || tx_a < 0 || tx_b < 0 || stop_fd < 0) {
    std::fprintf(stderr, "lw_delay: packet sockets on %s/%s: %s\n", o.if_a.c_str(),
                 o.if_b.c_str(), std::strerror(errno));
    return 1;
  }
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  bool rt = false;
  if (o.rt_prio > 0) {
    sched_param sp{};
    sp.sched_priority = o.rt_prio;
    rt = sched_setscheduler(0, SCHED_FIFO, &sp) == 0;  // threads inherit it
    if (!rt) std::fprintf(stderr, "lw_delay: SCHED_FIFO not allowed (%s); timing will suffer\n",
                          std::strerror(errno));
  }

  Direction fwd(rx_a, tx_b, stop_fd, o.delay[0], o);
  Direction rev(rx_b, tx_a, stop_fd, o.delay[1], o);
  std::thread t_fwd([&] { fwd.run(); });
  std::thread t_rev([&] { rev.run(); });
  std::printf("ready\n");
  std::fflush(stdout);

  int sig = 0;
  sigwait(&sigs, &sig);
  g_stop.store(true);
  const uint64_t one = 1;
  if (write(stop_fd, &one, sizeof one) < 0) std::perror("lw_delay: eventfd");
  t_fwd.join();
  t_rev.join();
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("{\"rt\":%s,\"cpu_user_s\":%.3f,\"cpu_sys_s\":%.3f,", rt ? "true" : "false",
              static_cast<double>(ru.ru_utime.tv_sec) + static_cast<double>(ru.ru_utime.tv_usec) * 1e-6,
              static_cast<double>(ru.ru_stime.tv_sec) + static_cast<double>(ru.ru_stime.tv_usec) * 1e-6);
  print_counters("fwd", fwd.counters(), o.delay[0]);
  std::printf(",");
  print_counters("rev", rev.counters(), o.delay[1]);
  std::printf("}\n");
  std::fflush(stdout);
  return 0;
}
