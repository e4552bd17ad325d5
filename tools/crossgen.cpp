// lw_crossgen: the lab's bursty cross-traffic generator (not part of the
// tool). UDP datagrams to HOST:PORT with exponential inter-departure times (a
// Poisson process) and IP sizes drawn from a weighted mix, at a mean IP-layer
// rate. Sleeps to each departure (timer slack 1 ns) and sends whatever is due
// on waking, so late wake-ups add bursts but never lower the mean rate.
//
//   lw_crossgen HOST PORT RATE_BPS SECONDS SEED SIZE:WEIGHT[,SIZE:WEIGHT...] [ON_S:OFF_S:ALPHA]
//   SECONDS 0 = until killed. HOST is an IPv4 or IPv6 literal; SIZE counts
//   the IP and UDP headers (28 bytes over IPv4, 48 over IPv6).
//
// With ON_S:OFF_S:ALPHA the source is on/off: on and off periods are drawn
// from Pareto distributions of shape ALPHA (heavy-tailed for ALPHA < 2; 1 <
// ALPHA <= 3) with means ON_S and OFF_S seconds, each truncated at 10 x its
// mean (so a window of a few seconds has a finite-variance rate; truncation
// shrinks both means by the same factor and keeps the duty cycle). During an
// on period packets leave as a Poisson process at the peak rate RATE_BPS x
// (ON_S + OFF_S) / ON_S, so the long-run mean stays RATE_BPS. The schedule is
// absolute (an on period's unsent remainder carries over into the next), as
// above.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

namespace {

double now_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void sleep_until_s(double t) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(t);
  ts.tv_nsec = static_cast<long>((t - static_cast<double>(ts.tv_sec)) * 1e9);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

int usage(const char* why) {
  std::fprintf(stderr,
               "lw_crossgen: %s\nusage: lw_crossgen HOST PORT RATE_BPS SECONDS SEED "
               "SIZE:WEIGHT[,SIZE:WEIGHT...] [ON_S:OFF_S:ALPHA]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7 && argc != 8) return usage("six or seven arguments expected");
  sockaddr_storage dst{};
  socklen_t dst_len = 0;
  auto* d4 = reinterpret_cast<sockaddr_in*>(&dst);
  auto* d6 = reinterpret_cast<sockaddr_in6*>(&dst);
  int hdr = 28;  // IP + UDP header bytes
  if (inet_pton(AF_INET, argv[1], &d4->sin_addr) == 1) {
    d4->sin_family = AF_INET;
    dst_len = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, argv[1], &d6->sin6_addr) == 1) {
    d6->sin6_family = AF_INET6;
    dst_len = sizeof(sockaddr_in6);
    hdr = 48;
  } else {
    return usage("HOST must be an IPv4 or IPv6 address");
  }
  const int port = std::atoi(argv[2]);
  const double rate = std::atof(argv[3]);
  const double seconds = std::atof(argv[4]);
  const unsigned seed = static_cast<unsigned>(std::strtoul(argv[5], nullptr, 10));
  if (port < 1 || port > 65535) return usage("bad PORT");
  if (!(rate > 0) || rate > 10e9) return usage("RATE_BPS must be in (0, 10e9]");
  if (seconds < 0) return usage("SECONDS must be >= 0");
  if (dst.ss_family == AF_INET6) {
    d6->sin6_port = htons(static_cast<uint16_t>(port));
  } else {
    d4->sin_port = htons(static_cast<uint16_t>(port));
  }

  std::vector<int> sizes;
  std::vector<double> weights;
  std::string mix = argv[6];
  for (std::size_t pos = 0; pos < mix.size();) {
    const std::size_t end = mix.find(',', pos);
    const std::string item = mix.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    const std::size_t colon = item.find(':');
    if (colon == std::string::npos) return usage("sizes are SIZE:WEIGHT");
    const int size = std::atoi(item.substr(0, colon).c_str());
    const double w = std::atof(item.substr(colon + 1).c_str());
    if (size <= hdr || size > 1500 || w < 0) {
      return usage(hdr == 48 ? "SIZE must be 49..1500 over IPv6, WEIGHT >= 0"
                             : "SIZE must be 29..1500, WEIGHT >= 0");
    }
    sizes.push_back(size);
    weights.push_back(w);
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  double total = 0, mean = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    total += weights[i];
    mean += weights[i] * sizes[i];
  }
  if (!(total > 0)) return usage("the weights must not all be 0");
  mean /= total;

  // Optional on/off modulation (see the header).
  bool onoff = false;
  double on_mean = 0, off_mean = 0, alpha = 0;
  if (argc == 8) {
    if (std::sscanf(argv[7], "%lf:%lf:%lf", &on_mean, &off_mean, &alpha) != 3)
      return usage("on/off is ON_S:OFF_S:ALPHA");
    if (!(on_mean > 0) || !(off_mean >= 0) || on_mean > 3600 || off_mean > 3600)
      return usage("ON_S must be > 0 and OFF_S >= 0 (at most 3600 s)");
    if (!(alpha > 1.0) || alpha > 3.0) return usage("ALPHA must be in (1, 3]");
    onoff = off_mean > 0;
  }
  const double peak = onoff ? rate * (on_mean + off_mean) / on_mean : rate;
  if (peak > 10e9) return usage("the on/off peak rate RATE_BPS x (ON_S + OFF_S) / ON_S exceeds 10e9");

  const int fd = socket(dst.ss_family, SOCK_DGRAM, 0);
  if (fd < 0) {
    std::perror("lw_crossgen: socket");
    return 1;
  }
  int sndbuf = 4 << 20;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);

  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(peak / (8.0 * mean));  // packets per second
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  // Pareto of shape alpha and mean m: scale xm = m (alpha - 1) / alpha,
  // x = xm / U^(1/alpha); truncated at 10 m.
  auto pareto = [&](double m) {
    const double xm = m * (alpha - 1.0) / alpha;
    const double u = 1.0 - unit(rng);  // (0, 1]
    return std::min(xm / std::pow(u, 1.0 / alpha), 10.0 * m);
  };
  std::discrete_distribution<std::size_t> pick(weights.begin(), weights.end());
  static char buf[1500];
  const double t0 = now_s();
  const double end = seconds > 0 ? t0 + seconds : 1e300;
  double next = t0;
  double on_end = onoff ? t0 + pareto(on_mean) : 1e300;
  for (;;) {
    next += gap(rng);
    // Past the end of the on period: the excess (memoryless) carries over
    // into the next on period, after an off period.
    while (next > on_end) {
      const double on_start = on_end + pareto(off_mean);
      next = on_start + (next - on_end);
      on_end = on_start + pareto(on_mean);
    }
    if (next > end) break;
    if (next > now_s()) sleep_until_s(next);
    const int ip_len = sizes[pick(rng)];
    // UDP: 28 (IPv6: 48) bytes of headers. A full socket buffer drops the
    // datagram (as a router would); the link counters are the ground truth.
    sendto(fd, buf, static_cast<std::size_t>(ip_len - hdr), MSG_DONTWAIT,
           reinterpret_cast<const sockaddr*>(&dst), dst_len);
  }
  close(fd);
  return 0;
}
