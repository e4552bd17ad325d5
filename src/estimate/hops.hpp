#pragma once
// Which hop is the bottleneck: per-hop dispersion of a recursive packet train
// (LinkWidth §3.2-3.3, after Pathneck's RPT). Hop k answers the head and the
// tail marker that expire (or end) there; the gap between its two replies is
// the train's dispersion as it arrived at hop k. Dispersion only grows at a
// link narrower than every link before it, so the last hop where it grows by a
// clear step is where the narrow link ends. Pure functions over timestamps.
#include <vector>

#include "linkwidth/time.hpp"

namespace lw {

// One train, per hop (index 0 = hop 1, last = target). Times in ns; 0 = missing.
struct HopTrainTiming {
  std::vector<Nanos> head_reply, tail_reply;
  // When hop k's head and tail markers were handed to the kernel: the offered
  // dispersion, "hop 0". Not the capture's departure times: those come after
  // our own qdisc and interface, which belong to link 1. 0 = not sent.
  std::vector<Nanos> head_sent, tail_sent;
  std::vector<double> bits;  // bits between hop k's head and tail (see RecursiveTrain::bits)
};

struct HopsFilter {
  // A hop is a choke point of a train when the dispersion per bit rises there
  // by at least this fraction over the highest level before it (Pathneck
  // counts a gap increase only above a threshold; ours is relative so that it
  // scales with the train).
  double min_step = 0.15;
  // A hop takes part only if it answered in at least this share of the trains;
  // otherwise it is "too few replies" and skipped in every train alike.
  double min_reply_fraction = 0.5;
  // Trains with every taking-part hop answered, needed to name a bottleneck.
  int min_trains = 3;
};

struct HopEstimate {
  int replies = 0;            // trains in which both markers of this hop were answered in order
  bool used = false;          // answered often enough to take part
  double dispersion_s = 0;    // median over trains (0 = none)
  double rate_bps = 0;        // median of bits / dispersion (0 = none)
  double choke_fraction = 0;  // share of voting trains in which this hop was a choke point
  double bottleneck_fraction = 0;  // share in which it was the last choke point
};

struct HopsEstimate {
  std::vector<HopEstimate> hops;
  int trains_voting = 0;  // trains with every used hop answered
  int bottleneck = -1;    // index into hops; -1 = none named
  double confidence = 0;  // bottleneck_fraction of that hop
  // Share of voting trains in which no hop slowed the train: our own link (or
  // the sender) was the narrowest.
  double no_choke_fraction = 0;
};

struct TrainChokes {
  std::vector<bool> choke;  // per hop
  int last = -1;            // last choke point, -1 = none
  bool valid = false;       // every hop in `use` answered
};

// Choke points of one train over the hops with use[k] (dispersion per bit,
// running maximum from the hop-0 level; LinkWidth §3.3 / Pathneck).
TrainChokes train_chokes(const HopTrainTiming& t, const std::vector<bool>& use,
                         const HopsFilter& f);

// Dispersion of hop k in one train, seconds; 0 if a reply is missing or the
// tail reply came first (reordered).
double hop_dispersion(const HopTrainTiming& t, int k);

// Per-hop aggregate over trains and the bottleneck vote. All trains must have
// the same number of hops.
HopsEstimate estimate_hops(const std::vector<HopTrainTiming>& trains, const HopsFilter& f);

// `measure`: the narrow link's hop when the capacity trains read low because a
// loaded link after the narrow one spread them (the gaps between back-to-back
// replies read above the trains: [trains, high] holds the capacity). The trains read C_t·C/(C + X_t)
// at the target, but at the hop the narrow link ends they have not met that
// link yet: their rate there is the narrow link's. A hop qualifies when it
// slowed most trains (choke_fraction >= 0.5), its rate lies above the trains'
// by more than 5% and at most at `high_bps`, no later used hop reads faster
// (3% slack), and a later used hop reads more than 5% slower: the loaded link
// showed after it (never the last hop, which reads what the capacity trains
// read: the lab's benchmark path 4 rebuilt, the target's hop read 14.8 where
// the trains read 14.0). And the drop from the hop's rate r to the trains'
// T must be one that cross traffic X < C_t on the later link can make:
// T = C_t r / (r + X) > C_t r / (r + C_t), C_t the gaps' reading
// `later_bps` (benchmark path 14: trains right at 61.9, gaps refused at 445
// from a TCP-loaded link after it, and hop 1 at 405.7 was taken for the
// narrow link: +558%). The last such hop; -1 when none.
struct HopRate {
  bool used = false;
  double rate_bps = 0;
  double choke_fraction = 0;
};
int narrow_hop_above_trains(const std::vector<HopRate>& hops, double trains_bps, double high_bps,
                            double later_bps);

}  // namespace lw
