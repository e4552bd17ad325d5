#include "app/frontends/analyze.hpp"

#include <algorithm>
#include <cstdint>
#include <iostream>

#include "app/runs/availbw_run.hpp"
#include "app/runs/shaper_run.hpp"
#include "app/runs/capacity_run.hpp"
#include "app/runs/capacity_tally.hpp"
#include "app/frontends/cli.hpp"
#include "app/runs/hops_run.hpp"
#include "app/plumbing/run_notes.hpp"
#include "app/plumbing/runner.hpp"
#include "estimate/availbw.hpp"
#include "estimate/reply_rate.hpp"
#include "linkwidth/error.hpp"
#include "plan/target_marker.hpp"
#include "match/match.hpp"
#include "report/hops_writers.hpp"
#include "report/writers.hpp"

namespace lw {

namespace {

Error bad_file(const std::string& name, const std::string& why) {
  return Error("analyze", name + ": " + why, "bad_capture", ExitCode::kUsage);
}

// One train as the records describe it.
struct RecordedTrain {
  TrainNote meta;  // the "train" note
  std::vector<SentProbe> sent;
  Nanos done = 0;  // when the live run stopped waiting for its replies (0 = unknown)
  std::optional<TrainDoneNote> done_note;  // the run's monotonic times, if the file holds them
  // A reply check right after it found that the target limits its replies:
  // the train's lost replies were the limit's (session.hpp, run_train).
  bool reply_limited = false;
};

// A phase of the run: its "run" note, its notes and trains in file order,
// its "end" note (null if the file stops before it). The run and end notes
// are read with read_phase_note<> of the phase's types.
struct RecordedPhase {
  std::string name;  // "capacity", "availbw", "hops"
  nlohmann::json run;
  nlohmann::json end;
  struct Event {
    RecordKind kind;      // clock, stopped, stop, burst, drops or train (then `train` is filled)
    nlohmann::json note;  // read with read_note<> of its kind
    RecordedTrain train;
  };
  std::vector<Event> events;
};

struct RecordedFile {
  nlohmann::json measure;      // the "run" note of measure/availbw, null for capacity
  nlohmann::json measure_end;  // its "end" note
  unsigned availbw_drops = 0;  // the measure's "drops" note
  RecordedPhase capacity{"capacity", {}, {}, {}}, availbw{"availbw", {}, {}, {}},
      hops{"hops", {}, {}, {}};
  // The search after a refill that refuted its bucket (a second avail-bw phase).
  RecordedPhase availbw_search{"availbw", {}, {}, {}};
};

// A phase's end note, or nullopt if the file stops before it.
template <class N>
std::optional<N> end_note(const nlohmann::json& end) {
  if (end.is_null()) return std::nullopt;
  return read_phase_note<N>(end);
}

nlohmann::json parse_note(const RunRecords::Item& it, const std::string& name) {
  nlohmann::json j = nlohmann::json::parse(it.note, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("kind")) {
    throw bad_file(name, "a linkwidth run record is damaged (not a JSON note)");
  }
  return j;
}

RecordedFile collect(const RunRecords& recs, const std::string& name) {
  RecordedFile out;
  RecordedPhase* in = nullptr;     // the phase being read
  RecordedTrain* train = nullptr;  // its train waiting for send records
  for (const auto& it : recs.items) {
    if (!it.is_note) {
      if (train && it.sent.probe.train == train->meta.train) {
        train->sent.push_back(it.sent);
      }
      continue;
    }
    nlohmann::json j = parse_note(it, name);
    const std::optional<RecordKind> kind = note_kind(j);
    if (!kind) continue;  // a kind this build does not know
    // Every run and end note names its phase (missing: a damaged file).
    const std::string phase = kind == RecordKind::kRun || kind == RecordKind::kEnd
                                  ? j.at("phase").get<std::string>()
                                  : std::string();
    if (kind == RecordKind::kRun) {
      train = nullptr;
      in = nullptr;
      if (phase == "measure" && out.measure.is_null()) {
        out.measure = std::move(j);
      } else if (phase == "capacity" && out.capacity.run.is_null()) {
        out.capacity.run = std::move(j);
        in = &out.capacity;
      } else if (phase == "availbw" && out.availbw.run.is_null()) {
        out.availbw.run = std::move(j);
        in = &out.availbw;
      } else if (phase == "availbw" && out.availbw_search.run.is_null()) {
        out.availbw_search.run = std::move(j);
        in = &out.availbw_search;
      } else if (phase == "hops" && out.hops.run.is_null()) {
        out.hops.run = std::move(j);
        in = &out.hops;
      }
    } else if (kind == RecordKind::kEnd) {
      train = nullptr;
      if (in && phase == in->name) in->end = std::move(j);
      if (phase == "measure") out.measure_end = std::move(j);
      in = nullptr;
    } else if (kind == RecordKind::kDrops && read_note<DropsNote>(j).phase == "availbw") {
      out.availbw_drops = read_note<DropsNote>(j).count;
    } else if (in && (kind == RecordKind::kStop || (in == &out.hops && kind == RecordKind::kDrops))) {
      train = nullptr;
      in->events.push_back({*kind, std::move(j), {}});
    } else if (in && kind == RecordKind::kTrain) {
      RecordedTrain t;
      t.meta = read_note<TrainNote>(j);
      in->events.push_back({*kind, std::move(j), std::move(t)});
      train = &in->events.back().train;
    } else if (in && kind == RecordKind::kTrainDone) {
      // Pipelined trains (a long round trip) are all sent before the first
      // is done: the note names its train.
      const TrainDoneNote done = read_note<TrainDoneNote>(j);
      for (auto e = in->events.rbegin(); e != in->events.rend(); ++e) {
        if (e->kind == RecordKind::kTrain && e->train.meta.train == done.train) {
          e->train.done = it.ts;
          e->train.done_note = done;
          break;
        }
      }
      train = nullptr;
    } else if (in && kind == RecordKind::kReplyLimit) {
      const int id = read_note<ReplyLimitNote>(j).train;
      for (auto e = in->events.rbegin(); e != in->events.rend(); ++e) {
        if (e->kind == RecordKind::kTrain && e->train.meta.train == id) {
          e->train.reply_limited = true;
          break;
        }
      }
    } else if (in && (kind == RecordKind::kClock || kind == RecordKind::kStopped ||
                      kind == RecordKind::kBurst || kind == RecordKind::kOwnLink)) {
      train = nullptr;
      in->events.push_back({*kind, std::move(j), {}});
    }
  }
  return out;
}

// The train as it was planned, from its send records (with the planned
// offsets, which the stall check of paced trains reads; 0 in older records),
// and what the pacer recorded.
bool rebuild(const RecordedTrain& rt, Train& train, std::vector<SendRecord>& sent) {
  if (rt.meta.probes == 0 || rt.meta.probes > 100000) return false;
  const int n = static_cast<int>(rt.meta.probes);
  train = Train{};
  train.id = rt.meta.train;
  train.probes.resize(static_cast<std::size_t>(n));
  sent.assign(static_cast<std::size_t>(n), SendRecord{});
  for (const SentProbe& sp : rt.sent) {
    if (sp.probe.index < 0 || sp.probe.index >= n) return false;
    train.probes[static_cast<std::size_t>(sp.probe.index)] = sp.probe;
    sent[static_cast<std::size_t>(sp.probe.index)].sent = true;
    sent[static_cast<std::size_t>(sp.probe.index)].actual_real = sp.sent;
  }
  for (int i = 0; i < n; ++i) {
    if (sent[static_cast<std::size_t>(i)].sent &&
        train.probes[static_cast<std::size_t>(i)].role == Role::kMarker) {
      train.markers.push_back(i);
    }
  }
  return true;
}

// Matches a recorded train against the packets the live run looked at: from
// its first send until it stopped waiting (else until `next_start`).
TrainOutcome replay_match(const RecordedTrain& rt, const std::vector<Decoded>& packets,
                          const IpAddr& self, Nanos next_start, const std::string& name,
                          Train& train) {
  std::vector<SendRecord> sent;
  if (!rebuild(rt, train, sent)) throw bad_file(name, "a train's records are inconsistent");
  Nanos from = INT64_MAX;
  for (const auto& s : sent) {
    if (s.sent) from = std::min(from, s.actual_real);
  }
  const Nanos to = rt.done != 0 ? rt.done : next_start;
  std::vector<Decoded> window;
  for (const Decoded& d : packets) {
    if (d.ts >= from && d.ts <= to) window.push_back(d);
  }
  return match_train(train, sent, window, self);
}

// An address of either family from the run record; 0.0.0.0 if none.
// A recorded address; a zone (fe80::1%eth0) names an interface of the
// machine that recorded it, not of this one: left out.
IpAddr parse_addr(const std::string& s) {
  return IpAddr::parse(s.substr(0, s.find('%'))).value_or(IpAddr());
}

IpAddr self_of(const CapacityResult& res, const std::string& name) {
  const IpAddr self = parse_addr(res.source);
  if (self.is_zero()) throw bad_file(name, "the run record names no source address");
  return self;
}

// A recorded phase handed back in order. Anything else than what comes next
// means the code asks for another run than the recorded one (a different
// build, a damaged file): an error, never a guess.
class PhaseCursor {
 public:
  PhaseCursor(const RecordedPhase& ph, const OfflineRead& r, const IpAddr& self,
              const std::string& name)
      : ph_(ph), r_(r), self_(self), name_(name) {}

  // The next event, which must be of `kind` ("stop" events are skipped:
  // the replay's stopped() reads them from the whole phase).
  const RecordedPhase::Event& next(RecordKind kind) {
    skip_stops();
    if (pos_ >= ph_.events.size() || kind_at(pos_) != kind) diverged();
    return ph_.events[pos_++];
  }
  bool next_is(RecordKind kind) {
    skip_stops();
    return pos_ < ph_.events.size() && kind_at(pos_) == kind;
  }
  const RecordedPhase::Event& peek() {
    skip_stops();
    if (pos_ >= ph_.events.size()) diverged();
    return ph_.events[pos_];
  }
  bool exhausted() {
    skip_stops();
    return pos_ >= ph_.events.size();
  }

  // The next recorded train, re-matched, in *recorded; it must have the
  // shape of `planned` (the train the code would have sent now).
  TrainOutcome train(const Train& planned, Train* recorded, const RecordedTrain** rt = nullptr) {
    const RecordedTrain& t = next(RecordKind::kTrain).train;
    // Older records close a capacity train only by the next one's first send.
    Nanos next_start = INT64_MAX;
    for (std::size_t j = pos_; j < ph_.events.size() && next_start == INT64_MAX; ++j) {
      if (!ph_.events[j].train.sent.empty()) next_start = ph_.events[j].train.sent.front().sent;
    }
    const TrainOutcome o = replay_match(t, r_.packets, self_, next_start, name_, *recorded);
    bool same = recorded->probes.size() == planned.probes.size();
    for (std::size_t i = 0; same && i < planned.probes.size(); ++i) {
      const Probe &a = recorded->probes[i], &b = planned.probes[i];
      same = a.role == b.role && a.ip_len == b.ip_len && a.ttl == b.ttl && a.dst == b.dst;
    }
    if (!same) diverged();
    if (rt) *rt = &t;
    return o;
  }

  [[noreturn]] void diverged() const {
    throw bad_file(name_, "the " + ph_.name +
                              " phase does not replay as recorded (record " + std::to_string(pos_) +
                              " of the phase)");
  }

 private:
  RecordKind kind_at(std::size_t i) const { return ph_.events[i].kind; }
  void skip_stops() {
    while (pos_ < ph_.events.size() && kind_at(pos_) == RecordKind::kStop) ++pos_;
  }

  const RecordedPhase& ph_;
  const OfflineRead& r_;
  IpAddr self_;
  std::string name_;
  std::size_t pos_ = 0;
};

// What the replayed gate reads from a phase's run and end notes.
struct ReplayGate {
  // The hops phase counts its bytes and packets from these (its caps are
  // checked on them); the other phases' records do not hold them.
  bool counted = false;
  std::uint64_t bytes0 = 0, packets0 = 0;
  Nanos reply_wait = 0;
  double load_capacity_bps = 0;
  bool ended = false;                   // the phase's end note is in the file
  std::optional<StopReason> end_stop;  // the capacity phase's end note's stop reason
};

// The runner of `linkwidth analyze`: hands a phase what the recorded run saw,
// in the order the live run asked for it: clock readings, each train's
// replies, the gate's verdicts. The gate is answered from the records: a
// "stopped" note (the live gate's verdict), else, in older records that did
// not note it, from the recorded stop check, counters and clock (hops) or the
// phase's end note (capacity).
class ReplayRunner : public ProbeRunner {
 public:
  // `max_bytes`, `t_cap`: the live run's caps (checked only where the records
  // count the bytes and hold the clock, i.e. the hops phase's).
  ReplayRunner(const RecordedPhase& ph, const OfflineRead& r, const IpAddr& self,
               const std::string& name, const ReplayGate& gate, std::uint64_t max_bytes = 0,
               Nanos t_cap = 0)
      : cur_(ph, r, self, name), gate_(gate), max_bytes_(max_bytes), t_cap_(t_cap) {
    counted_ = gate.counted;
    bytes_ = gate.bytes0;
    packets_ = gate.packets0;
    reply_wait_ = gate.reply_wait;
    // The --max-load budget an earlier phase left (hops: its idle reads it).
    set_load_capacity(gate.load_capacity_bps);
    for (const auto& e : ph.events) {
      if (e.kind == RecordKind::kStop) stop_at_ = read_note<StopNote>(e.note).check;
    }
  }

  StopReason admit(const Train& train, const std::function<Nanos()>& start_at,
                   Nanos span) override {
    if (cur_.next_is(RecordKind::kStopped)) return take_stopped();
    if (stopped()) return StopReason::kInterrupted;
    if (counted_ && bytes_ + train.total_bytes() > max_bytes_) return StopReason::kMaxBytes;
    const Nanos start = start_at();
    if (cur_.next_is(RecordKind::kStopped)) return take_stopped();
    if (counted_ && start + span + reply_wait_ > t_cap_) return StopReason::kMaxTime;
    if (stopped()) return StopReason::kInterrupted;
    if (cur_.next_is(RecordKind::kTrain)) return StopReason::kNone;
    return recorded_end();
  }

  StopReason check_time(Nanos) override {
    if (cur_.next_is(RecordKind::kStopped) &&
        read_note<StoppedNote>(cur_.peek().note).reason == StopReason::kMaxTime) {
      return take_stopped();
    }
    if (cur_.next_is(RecordKind::kTrain) || !gate_.ended) return StopReason::kNone;
    return gate_.end_stop == StopReason::kMaxTime ? StopReason::kMaxTime : StopReason::kNone;
  }

  TrainResult run(const Train& planned, const TrainOptions&) override {
    TrainResult out;
    const RecordedTrain* rt = nullptr;
    out.outcome = cur_.train(planned, &out.train, &rt);
    for (const auto& sp : rt->sent) {
      ++packets_;
      bytes_ += sp.probe.ip_len;
    }
    ++trains_;
    if (rt->done_note) {  // else the file ends before the train's replies did
      out.start_mono = rt->done_note->start_mono;
      out.end_mono = rt->done_note->end_mono;
    }
    out.replies_limited = rt->reply_limited;
    return out;
  }

  Nanos now() override { return read_note<ClockNote>(cur_.next(RecordKind::kClock).note).mono; }
  void wait_until(Nanos) override {}
  bool stopped() override { return stop_at_ > 0 && ++checks_ >= stop_at_; }
  // The live run notes a reply burst limit only once it knows one.
  int reply_burst() override {
    if (!cur_.next_is(RecordKind::kBurst)) return ReplyGovernor::kNoBurstLimit;
    return read_note<BurstNote>(cur_.next(RecordKind::kBurst).note).max;
  }
  // The live run notes our link's avail-bw only when it changed (older
  // records have none: 0, not known).
  double own_link_availbw() override {
    if (cur_.next_is(RecordKind::kOwnLink)) {
      own_ = read_note<OwnLinkNote>(cur_.next(RecordKind::kOwnLink).note).availbw_bps;
    }
    return own_;
  }
  std::uint64_t bytes_sent() override { return bytes_; }
  std::uint64_t packets_sent() override { return packets_; }
  unsigned capture_drops() override {
    return read_note<DropsNote>(cur_.next(RecordKind::kDrops).note).count;
  }
  Nanos reply_wait() const override { return reply_wait_; }

  std::size_t trains() const { return trains_; }

 private:
  StopReason take_stopped() {
    return read_note<StoppedNote>(cur_.next(RecordKind::kStopped).note).reason;
  }

  // No train where the live run sent one: the end note's stop reason
  // (capacity), "incomplete" if the file ends first, else a divergence.
  StopReason recorded_end() {
    if (gate_.end_stop) return *gate_.end_stop;
    if (cur_.exhausted() && !gate_.ended) return StopReason::kIncomplete;
    cur_.diverged();
  }

  PhaseCursor cur_;
  ReplayGate gate_;
  std::uint64_t max_bytes_;
  Nanos t_cap_;
  Nanos reply_wait_ = 0;
  bool counted_ = false;
  int stop_at_ = 0;
  int checks_ = 0;
  std::size_t trains_ = 0;
  std::uint64_t bytes_ = 0, packets_ = 0;
  double own_ = 0;  // the last OwnLinkNote read
};

// The capacity phase's configuration, from the parameters its head records
// (the option table's "params" keys), in the ranges parse_cli allows.
Config capacity_config_from(const nlohmann::json& params) {
  return recorded_config(config_from_params(params), "capacity");
}

// The capacity phase through the live run's own loop (capacity_trains).
CapacityResult replay_capacity(const RecordedPhase& ph, const OfflineRead& r,
                               const std::string& name, bool verbose) {
  const auto run = read_phase_note<CapacityRunNote>(ph.run);
  const auto end = end_note<CapacityEndNote>(ph.end);
  CapacityResult res;
  apply_head(res, run.head);
  const IpAddr self = self_of(res, name);
  Config c = capacity_config_from(res.params);
  c.verbose = verbose;
  SeqAllocator seqs(0);
  PhasePath path{
      FlowId{self, parse_addr(res.target_addr), static_cast<std::uint16_t>(res.source_port),
             static_cast<std::uint16_t>(res.port), 0, res.marker_kind},
      res.params.at("packet_size").get<int>(), res.rtt_s, seqs};
  ReplayGate gate;
  gate.ended = end.has_value();
  if (end) gate.end_stop = end->stop_reason;
  ReplayRunner runner(ph, r, self, name, gate);
  // The shaper probe's streams are not replayed: the loop gets what the live
  // probe found (the end note's checks), at the same train.
  const nlohmann::json checks = end && end->checks ? *end->checks : nlohmann::json();
  const ShaperRecord recorded = checks.contains("shaper_check")
                                    ? shaper_from_json(checks.at("shaper"), checks.at("shaper_check"))
                                    : ShaperRecord{};
  ShaperProbe probe = nullptr;
  if (recorded.probed) probe = [&](const ShaperHints&) { return recorded; };
  CapacityTrains trains = capacity_trains(runner, c, path, res, probe);
  if (!end) {
    res.stop_reason = StopReason::kIncomplete;
    res.probe_packets = runner.packets_sent();
    res.probe_bytes = runner.bytes_sent();
  } else {
    res.stop_reason = end->stop_reason;
    res.elapsed_s = end->elapsed_s;
    res.probe_packets = end->probe_packets;
    res.probe_bytes = end->probe_bytes;
  }
  trains.tally.finish(res, run.max_rate_bps);
  if (end && end->checks) apply_capacity_checks(res, *end->checks);
  const unsigned drops = end ? end->capture_drops : 0;
  if (drops > 0) {
    res.warnings.push_back({WarningCode::kCaptureDrops,
                            std::to_string(drops) + " packets dropped by the capture buffer"});
  }
  if (!end) {
    res.warnings.push_back({WarningCode::kCaptureIncomplete,
                            "the capture ends before the run did; the result covers the " +
                                std::to_string(runner.trains()) + " trains it holds"});
  }
  if (r.truncated) {
    res.warnings.push_back(
        {WarningCode::kCaptureTruncated, "the capture file ends inside a packet record"});
  }
  add_systematic_margin(res);
  return res;
}

HopsResult replay_hops(const RecordedPhase& ph, const OfflineRead& r, const std::string& name,
                       bool verbose) {
  const auto run = read_phase_note<HopsRunNote>(ph.run);
  const auto end = end_note<HopsEndNote>(ph.end);
  Config c = hops_config_from(run.config);
  c.verbose = verbose;
  HopsResult res;
  apply_head(res, run.head);
  res.hop_markers = c.hop_markers;
  const IpAddr self = parse_addr(res.source);
  const IpAddr dst = parse_addr(res.target_addr);
  if (self == 0 || dst == 0) throw bad_file(name, "the hops record names no addresses");
  const FlowId flow{self, dst, static_cast<std::uint16_t>(res.source_port),
                    static_cast<std::uint16_t>(res.port), 0, res.marker_kind};
  SeqAllocator seqs(0);
  ReplayGate gate;
  gate.counted = true;
  gate.bytes0 = run.bytes0;
  gate.packets0 = run.packets0;
  gate.reply_wait = run.reply_wait;
  gate.load_capacity_bps = run.load_capacity_bps.value_or(0);
  gate.ended = end.has_value();
  ReplayRunner io(ph, r, self, name, gate, c.max_bytes, run.t_begin + from_seconds(c.max_time_s));
  PhasePath path{flow, run.packet_size, run.rtt_s, seqs};
  HopsResult out = run_hops_on(io, std::move(res), c, path, dst, run.t_begin);
  if (end) {
    // The reply checks' findings, as the live run noted them.
    for (const Warning& w : warnings_from_json(end->reply_warnings)) out.warnings.push_back(w);
  }
  return out;
}

AvailbwResult replay_search(const RecordedPhase& ph, const OfflineRead& r, const MeasureResult& m,
                            const Config& c, const std::string& name);

MeasureResult replay_measure(const RecordedFile& f, const OfflineRead& r, const std::string& name,
                             bool verbose) {
  const auto run = read_phase_note<MeasureRunNote>(f.measure);
  const auto run_end = end_note<MeasureEndNote>(f.measure_end);
  MeasureResult m;
  m.command = run.command;
  Config c = availbw_config_from(run.config);
  c.verbose = verbose;
  auto finish = [&] {
    if (!run_end) {
      m.availbw.warnings.push_back(
          {WarningCode::kCaptureIncomplete, "the capture ends before the run did"});
      return;
    }
    m.elapsed_s = run_end->elapsed_s;
    m.probe_packets = run_end->probe_packets;
    m.probe_bytes = run_end->probe_bytes;
  };
  double C = c.capacity_bps;
  if (C > 0) {
    apply_head(m.capacity, run.head);
    given_capacity(m, C);
  } else {
    if (f.capacity.run.is_null()) throw bad_file(name, "the capture holds no capacity phase");
    m.capacity = replay_capacity(f.capacity, r, name, verbose);
    if (!capacity_phase_done(m, &C, run.hops)) {
      finish();
      return m;
    }
  }
  if (run.hops) {
    if (f.hops.run.is_null()) throw bad_file(name, "the capture holds no hops phase");
    m.hops = replay_hops(f.hops, r, name, verbose);
    m.has_hops = true;
    if (m.hops.stop_reason == StopReason::kInterrupted) {
      m.availbw.stop_reason = StopReason::kInterrupted;
      finish();
      return m;
    }
    if (!(c.capacity_bps > 0)) narrow_capacity_from_hops(m, &C);
  }
  const RecordedPhase& ph = f.availbw;
  if (ph.run.is_null()) {
    // The live run ended between the phases (interrupted): nothing to replay.
    m.availbw.stop_reason = StopReason::kIncomplete;
    finish();
    return m;
  }
  const auto a_run = read_phase_note<AvailbwRunNote>(ph.run);
  if (a_run.shaper_refill) {
    // A token bucket's refill streams are not replayed (as the shaper
    // probe's are not): the live run's result, as it noted it; and the
    // search after it when it refuted the bucket.
    AvailbwResult refill =
        shaper_availbw_from_note(end_note<AvailbwEndNote>(ph.end), m.capacity.shaper);
    if (refill_refuted(m, refill, &C, run.hops)) {
      if (f.availbw_search.run.is_null()) {
        throw bad_file(name, "the capture holds no search after the refuted refill");
      }
      AvailbwResult a = replay_search(f.availbw_search, r, m, c, name);
      merge_refill(a, refill);
      refill = std::move(a);
    }
    add_availbw(m, std::move(refill), f.availbw_drops);
    finish();
    return m;
  }
  add_availbw(m, replay_search(ph, r, m, c, name), f.availbw_drops);
  finish();
  return m;
}

// One avail-bw search phase of a recorded `measure`/`availbw`.
AvailbwResult replay_search(const RecordedPhase& ph, const OfflineRead& r, const MeasureResult& m,
                            const Config& c, const std::string& name) {
  const auto a_run = read_phase_note<AvailbwRunNote>(ph.run);
  const auto a_end = end_note<AvailbwEndNote>(ph.end);
  SeqAllocator seqs(0);
  PhasePath path{FlowId{self_of(m.capacity, name), parse_addr(m.capacity.target_addr),
                        static_cast<std::uint16_t>(m.capacity.source_port),
                        static_cast<std::uint16_t>(m.capacity.port),
                        0, m.capacity.marker_kind},
                 a_run.packet_size, m.capacity.rtt_s, seqs};
  AvailbwResult a;
  ReplayGate gate;
  gate.ended = a_end.has_value();
  ReplayRunner runner(ph, r, path.flow.src, name, gate);
  const Config ac = availbw_phase_config(c, m.capacity);
  search_availbw(runner, path, ac, a_run.capacity_bps, a_run.t_cap, a);
  note_trains_within_queue(c, ac, a);
  if (a_end) {
    // The reply checks' findings, as the live run noted them.
    for (const Warning& w : warnings_from_json(a_end->reply_warnings)) a.warnings.push_back(w);
    a.elapsed_s = a_end->elapsed_s;
    a.probe_bytes = a_end->probe_bytes;
    a.probe_packets = a_end->probe_packets;
    // Counters are not in the capture: as the live run read them.
    if (!a_end->own_traffic.is_null()) a.own_traffic = own_traffic_from_json(a_end->own_traffic);
  }
  return a;
}

void require_records(const OfflineRead& r, const std::string& name) {
  if (r.records.items.empty()) {
    throw bad_file(name,
                   "no linkwidth run records in this capture: analyze reads files written by "
                   "linkwidth --save-pcap (a plain tcpdump capture lacks the send times and the "
                   "train boundaries)");
  }
}

template <class F>
auto guarded(const std::string& name, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const nlohmann::json::exception& e) {
    // A note that parsed as JSON but holds the wrong types: a damaged file.
    // nlohmann's text after its "[json.exception.x.n] " prefix names the field.
    std::string why = e.what();
    const std::size_t cut = why.find("] ");
    if (cut != std::string::npos) why = why.substr(cut + 2);
    throw bad_file(name, "a linkwidth run record is damaged (a field missing or of the wrong "
                         "type: " + why + ")");
  }
}

}  // namespace

CapacityResult analyze_capacity(const OfflineRead& r, const std::string& name, bool verbose) {
  return guarded(name, [&] {
    require_records(r, name);
    const RecordedFile f = collect(r.records, name);
    if (f.capacity.run.is_null()) {
      throw bad_file(name, "the capture holds no capacity run (only discovery or hops records)");
    }
    const Command command = read_phase_note<CapacityRunNote>(f.capacity.run).command;
    if (command != Command::kCapacity) {
      throw bad_file(name,
                     std::string("the capture holds a '") + lw::name(command) + "' run, not a capacity run");
    }
    return replay_capacity(f.capacity, r, name, verbose);
  });
}

AnalyzedRun analyze_run(const OfflineRead& r, const std::string& name, bool verbose) {
  return guarded(name, [&] {
    require_records(r, name);
    const RecordedFile f = collect(r.records, name);
    AnalyzedRun out;
    if (f.measure.is_null() && !f.hops.run.is_null() &&
        read_phase_note<HopsRunNote>(f.hops.run).command == Command::kHops) {
      out.kind = AnalyzedRun::kHops;
      out.hops = replay_hops(f.hops, r, name, verbose);
      return out;
    }
    if (f.measure.is_null()) {
      out.capacity = analyze_capacity(r, name, verbose);
      return out;
    }
    out.kind = AnalyzedRun::kMeasure;
    out.measure = replay_measure(f, r, name, verbose);
    return out;
  });
}

int run_analyze_main(const std::vector<std::string>& args) {
  AnalyzeOptions opts;
  try {
    opts = parse_analyze_cli(args);
  } catch (const UsageError& e) {
    std::cerr << "linkwidth: " << e.what() << std::endl;
    return static_cast<int>(ExitCode::kUsage);
  }
  if (opts.show_help) {
    std::cout << kAnalyzeHelp;
    return 0;
  }
  const bool json = opts.json, verbose = opts.verbose;
  const std::string& file = opts.file;
  auto fail = [&](const std::string& code, const std::string& msg, ExitCode exit) {
    if (json) {
      std::cout << error_json("analyze", file, {code, msg}, nullptr).dump(2) << std::endl;
    }
    std::cerr << "linkwidth: " << msg << std::endl;
    return static_cast<int>(exit);
  };
  if (file.empty()) {
    return fail("usage", std::string("no FILE given; ") + kAnalyzeUsage + ".", ExitCode::kUsage);
  }
  try {
    const AnalyzedRun run = analyze_run(read_pcap_file(file), file, verbose);
    const bool measure = run.kind == AnalyzedRun::kMeasure, hops = run.kind == AnalyzedRun::kHops;
    nlohmann::json doc = measure ? to_json(run.measure)
                         : hops  ? to_json(run.hops)
                                 : to_json(run.capacity);
    doc["offline"] = {{"pcap", file}};
    if (json) {
      std::cout << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
    } else {
      std::cout << "analysed offline from " << file << "\n"
                << (measure ? to_text(run.measure)
                    : hops  ? to_text(run.hops)
                            : to_text(run.capacity));
    }
    const bool valid = measure ? run.measure.availbw.valid
                       : hops  ? run.hops.bottleneck_hop != 0
                               : run.capacity.valid;
    return valid ? 0 : static_cast<int>(ExitCode::kRuntime);
  } catch (const Error& e) {
    const std::string msg = e.what();
    // A file we cannot read or re-run is exit 2; a replayed run that failed
    // live (an error the run threw) fails with the live run's code.
    const bool file_error =
        e.component() == "analyze" || e.component() == "capture" || e.code() == "bad_capture";
    return fail(e.code(), msg, file_error ? ExitCode::kUsage : e.exit_code());
  } catch (const std::exception& e) {
    return fail("bad_capture", file + ": cannot analyse: " + e.what(), ExitCode::kUsage);
  }
}

}  // namespace lw
