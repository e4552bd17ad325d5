#pragma once
// Policer detection from one stream (plan/policer_plan.hpp): full-size SYN
// markers among RST load that empties a token bucket, then a chirp of
// full-size SYN markers alone whose rate falls geometrically. A policer (a
// token bucket of rate R and depth B that drops what exceeds it, with no
// queue) lets the first B bytes through, then, bucket empty, a full-size
// packet only when R has brought in its bytes: of the chirp's markers sent
// faster than R about R/r pass, and from about R down every one. Nothing is
// delayed. So:
//   - the bucket lies between the last load position answered and the first
//     one lost (bytes from the stream's start, less the tokens R brought in
//     meanwhile). A position is a few markers back to back: once the bucket
//     is empty, one marker passes whenever a packet of tokens has come in
//     (about one in r/R of the load, or any after a stall of the sender), but
//     n back to back pass only if R brought n packets of tokens over the gaps
//     since the bucket last dropped one; a position where R's high end could
//     have is no evidence;
//   - R: the chirp's markers answered before its last loss carried R times
//     the time from the chirp's start to that loss, give or take one packet
//     of tokens in the bucket at either end (the count), and R lies below
//     the rate of the last marker lost.
//   std::vector<PolicerPoint> pts = ...;
//   PolicerFinding f = detect_policer(pts, 8.0 * 1500);
// Pure: no sockets, clocks or globals.
#include <string>
#include <vector>

#include "linkwidth/time.hpp"

namespace lw {

struct PolicerPoint {
  double bits_before = 0;  // IP bits of the stream sent before this marker
  Nanos sent = 0;          // when it left (one origin for all points)
  Nanos reply = 0;         // its reply's arrival (same clock; 0 = lost)
  bool chirp = false;      // one of the chirp's markers (else one among the load);
                           // with marker = false: a packet of ours sent among them
  // Load markers: the bucket position they mark (markers sharing one left
  // back to back; -1: a position of its own).
  int position = -1;
  // false: a load packet, its send time only (no reply to wait for). With the
  // load's packets among the points the bucket's estimate knows the gaps the
  // sender left (a stall lets tokens in); without them it takes the gaps
  // between markers.
  bool marker = true;
  double bits = 0;  // its IP bits (0: the markers' size, packet_bits)
};

struct PolicerOptions {
  // Of the chirp's markers sent at over half its first rate, at least this
  // share lost (an ordinary path loses none, or a few at random).
  double min_fast_loss = 0.5;
  // Markers answered in a row at the chirp's end (the rate fell below R).
  int min_tail_answered = 3;
  // Answered markers delayed over the least delay by more than this (median):
  // they queued somewhere, and a queue that drops is no policer.
  Nanos max_queue_delay = 2 * kMs;
  // IP bits our own kernel sends through the path for each reply (open-port
  // markers: an RST answering each SYN/ACK; 0 = none): they take the
  // policer's tokens while the chirp runs.
  double echo_bits = 0;
};

struct PolicerFinding {
  bool found = false;
  double rate_bps = 0;            // sustained rate R
  double rate_low_bps = 0;        // its interval (one packet either way of the count,
  double rate_high_bps = 0;       // and under the last lost marker's rate)
  // Every chirp marker after the fast ones lost: R is below the chirp's
  // slowest rate, which rate_high_bps then holds (rate_bps too).
  bool rate_is_upper_bound = false;
  double burst_low_bytes = 0;     // the bucket: at least (the last load position answered) ...
  double burst_high_bytes = 0;    // ... and at most (the first lost); 0 = none lost among the load
  int chirp_markers = 0;
  int chirp_answered = 0;
  std::string reason;             // why not found
};

// `points`: every marker in send order (the load's first, then the chirp's),
// and best the load's packets among them (marker = false).
// `packet_bits`: the markers' size in bits (full-size, as the load).
PolicerFinding detect_policer(const std::vector<PolicerPoint>& points, double packet_bits,
                              const PolicerOptions& opt = {});

}  // namespace lw
