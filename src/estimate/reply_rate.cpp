#include "estimate/reply_rate.hpp"

#include <algorithm>
#include <cmath>

namespace lw {

namespace {

constexpr int kBurst = 4;          // replies asked of a host at once (more if a train needs more)
constexpr std::size_t kWindow = 8;  // trains looked back on
constexpr int kLossyTrains = 2;     // lossy trains in the window that call for a check
constexpr int kMaxRounds = 4;

double burst_for(int asked) { return std::max(kBurst, asked); }

}  // namespace

ReplyGovernor::ReplyGovernor(double max_per_s, double floor_per_s)
    : max_(max_per_s), floor_(std::min(floor_per_s, max_per_s)), rate_(max_per_s) {}

double ReplyGovernor::level(const Bucket& b, Nanos t, double burst) const {
  return std::min(burst, b.tokens + rate_ * to_seconds(std::max<Nanos>(0, t - b.t)));
}

Nanos ReplyGovernor::ready_at(const IpAddr& host, int asked, Nanos now) const {
  if (asked <= 0) return now;
  const auto it = buckets_.find(host);
  if (it == buckets_.end()) return now;  // a new host's bucket is full
  const double burst = burst_for(asked);
  const double have = level(it->second, now, burst);
  if (have >= asked) return now;
  return now + from_seconds((asked - have) / rate_);
}

void ReplyGovernor::spend(const IpAddr& host, int asked, Nanos t) {
  if (asked <= 0) return;
  const double burst = burst_for(asked);
  auto [it, fresh] = buckets_.try_emplace(host);
  Bucket& b = it->second;
  const double have = fresh ? burst : level(b, t, burst);
  b.tokens = have - asked;  // may go negative if the caller did not wait
  b.t = t;
}

bool ReplyGovernor::lossy(int asked, int answered) {
  const int lost = asked - answered;
  return lost >= 3 && lost >= 0.2 * asked;
}

bool ReplyGovernor::record_train(int asked, int answered) {
  if (asked <= 0) return false;
  recent_.push_back(answered < asked);
  lossy_since_.push_back(answered < asked ? asked : 0);
  if (lossy_since_.size() > kWindow) lossy_since_.pop_front();
  if (recent_.size() > kWindow) recent_.pop_front();
  ++since_round_;
  const int lossy_trains = static_cast<int>(std::count(recent_.begin(), recent_.end(), true));
  if (lossy_trains < kLossyTrains || since_round_ < static_cast<int>(kWindow) ||
      rounds_ >= kMaxRounds) {
    return false;
  }
  ++rounds_;
  since_round_ = 0;
  recent_.clear();
  lossy_asked_ = *std::max_element(lossy_since_.begin(), lossy_since_.end());
  lossy_since_.clear();
  round_lossy_ = false;
  round_start_rate_ = rate_;
  return true;
}

bool ReplyGovernor::clean(int asked, int answered) { return asked - answered <= 1; }

ReplyGovernor::Step ReplyGovernor::on_check(int asked, int answered) {
  auto path_loss = [&] {
    rate_ = round_start_rate_;
    lossy_rate_ = 0;
    confirming_ = false;
    return Step::kPathLoss;
  };
  if (confirming_) {
    // The second clean check at the lower rate: random loss on the path
    // rarely gives two in a row after a lossy one.
    confirming_ = false;
    return clean(asked, answered) ? Step::kLimited : path_loss();
  }
  if (lossy(asked, answered)) {
    round_lossy_ = true;
    lossy_rate_ = rate_;
    rate_ /= 2;
    if (rate_ < floor_) return path_loss();
    return Step::kCheckAgain;
  }
  if (!clean(asked, answered)) return path_loss();  // some loss, whatever the rate
  if (!round_lossy_) return Step::kLoadLoss;
  confirming_ = true;
  return Step::kCheckAgain;  // at the same rate
}

bool ReplyGovernor::on_burst_check(const std::vector<BurstCheck>& checks) {
  // Every check lost replies as a limit does: at its end (one lost reply
  // but the last, or a few scattered over the check, is chance).
  int most = 0;
  for (const BurstCheck& b : checks) {
    const int lost = b.asked - b.answered;
    if (lost <= 0 || b.first_lost < 0 || b.first_lost >= b.asked) return false;
    const int from_first = b.asked - b.first_lost;  // SYNs from the first lost reply on
    if (lost == 1 ? from_first != 1 : 2 * lost < from_first) return false;
    most = std::max(most, b.answered);
  }
  if (checks.empty()) return false;
  lossy_asked_ = 0;
  const int limit = std::max(kCheckMarkers, most);
  if (limit >= max_burst_) return false;  // known already
  max_burst_ = limit;
  // Losses of trains that asked for more say nothing any more.
  recent_.clear();
  lossy_since_.clear();
  return true;
}

const char* step_name(ReplyGovernor::Step s) {
  switch (s) {
    case ReplyGovernor::Step::kCheckAgain:
      return "check_again";
    case ReplyGovernor::Step::kLimited:
      return "limited";
    case ReplyGovernor::Step::kLoadLoss:
      return "load_loss";
    case ReplyGovernor::Step::kPathLoss:
      return "path_loss";
  }
  return "?";
}

}  // namespace lw
