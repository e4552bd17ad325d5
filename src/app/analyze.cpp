#include "app/analyze.hpp"

#include <algorithm>
#include <iostream>

#include "app/capacity_tally.hpp"
#include "linkwidth/error.hpp"
#include "match/match.hpp"
#include "report/writers.hpp"

namespace lw {

namespace {

Error bad_file(const std::string& name, const std::string& why) {
  return Error("analyze", name + ": " + why, "bad_capture", ExitCode::kUsage);
}

// One capacity train as the records describe it.
struct RecordedTrain {
  nlohmann::json meta;  // the "train" note
  std::vector<SentProbe> sent;
  Nanos done = 0;  // when the live run stopped waiting for its replies (0 = unknown)
};

struct RecordedRun {
  nlohmann::json run;  // the "run" note of the capacity phase
  nlohmann::json end;  // the "end" note, null if the file stops before it
  std::vector<RecordedTrain> trains;
};

nlohmann::json parse_note(const RunRecords::Item& it, const std::string& name) {
  nlohmann::json j = nlohmann::json::parse(it.note, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("kind")) {
    throw bad_file(name, "a linkwidth run record is damaged (not a JSON note)");
  }
  return j;
}

RecordedRun collect(const RunRecords& recs, const std::string& name) {
  RecordedRun out;
  bool in_capacity = false;
  for (const auto& it : recs.items) {
    if (!it.is_note) {
      if (in_capacity && !out.trains.empty() && out.trains.back().done == 0 &&
          it.sent.probe.train == out.trains.back().meta.value("train", -1)) {
        out.trains.back().sent.push_back(it.sent);
      }
      continue;
    }
    const nlohmann::json j = parse_note(it, name);
    const std::string kind = j.value("kind", "");
    const std::string phase = j.value("phase", "");
    if (kind == "run") {
      if (phase == "capacity" && out.run.is_null()) {
        out.run = j;
        in_capacity = true;
      } else {
        in_capacity = false;
      }
    } else if (kind == "train" && in_capacity) {
      out.trains.push_back({j, {}, 0});
    } else if (kind == "train_done" && in_capacity && !out.trains.empty()) {
      out.trains.back().done = it.ts;
    } else if (kind == "end" && in_capacity) {
      out.end = j;
      in_capacity = false;
    }
  }
  return out;
}

// The train as it was planned, from its send records (offsets are not kept:
// nothing downstream of the pacer uses them), and what the pacer recorded.
bool rebuild(const RecordedTrain& rt, Train& train, std::vector<SendRecord>& sent) {
  const int n = rt.meta.value("probes", 0);
  if (n <= 0 || n > 100000) return false;
  train = Train{};
  train.id = rt.meta.value("train", 0);
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

void fill_head(CapacityResult& res, const nlohmann::json& head) {
  res.target = head.value("target", "");
  res.target_addr = head.value("target_addr", "");
  res.port = head.value("port", 0);
  res.source = head.value("source", "");
  res.interface = head.value("interface", "");
  res.source_port = head.value("source_port", 0);
  res.rtt_s = head.value("rtt_s", 0.0);
  res.params = head.value("params", nlohmann::json::object());
  for (const auto& w : head.value("warnings", nlohmann::json::array())) {
    res.warnings.push_back({w.value("code", ""), w.value("message", "")});
  }
}

std::uint32_t parse_ipv4(const std::string& s) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  char extra = 0;
  if (std::sscanf(s.c_str(), "%u.%u.%u.%u%c", &a, &b, &c, &d, &extra) != 4 || a > 255 || b > 255 ||
      c > 255 || d > 255) {
    return 0;
  }
  return (a << 24) | (b << 16) | (c << 8) | d;
}

}  // namespace

namespace {

CapacityResult analyze_records(const OfflineRead& r, const std::string& name, bool verbose) {
  if (r.records.items.empty()) {
    throw bad_file(name,
                   "no linkwidth run records in this capture: analyze reads files written by "
                   "linkwidth --save-pcap (a plain tcpdump capture lacks the send times and the "
                   "train boundaries)");
  }
  const RecordedRun run = collect(r.records, name);
  if (run.run.is_null()) {
    throw bad_file(name, "the capture holds no capacity run (only discovery or hops records)");
  }
  const std::string command = run.run.value("command", "");
  if (command != "capacity") {
    throw bad_file(name, "the capture holds a '" + command +
                             "' run; analyze re-runs 'capacity' runs only (measure, availbw "
                             "and hops captures are not supported yet)");
  }
  CapacityResult res;
  fill_head(res, run.run.value("head", nlohmann::json::object()));
  const std::uint32_t self = parse_ipv4(res.source);
  if (self == 0) throw bad_file(name, "the run record names no source address");

  CapacityTally tally(run.run.value("two_lengths", true), verbose);
  std::uint64_t packets = 0, bytes = 0;
  for (std::size_t k = 0; k < run.trains.size(); ++k) {
    const RecordedTrain& rt = run.trains[k];
    Train train;
    std::vector<SendRecord> sent;
    if (!rebuild(rt, train, sent)) throw bad_file(name, "a train's records are inconsistent");
    Nanos from = 0;
    for (const auto& s : sent) {
      if (s.sent && (from == 0 || s.actual_real < from)) from = s.actual_real;
    }
    for (const auto& sp : rt.sent) {
      ++packets;
      bytes += sp.probe.ip_len;
    }
    // What the live run looked at: packets from the train's first send until
    // it stopped waiting (else until the next train).
    Nanos to = rt.done;
    if (to == 0) {
      to = k + 1 < run.trains.size() && !run.trains[k + 1].sent.empty()
               ? run.trains[k + 1].sent.front().sent
               : INT64_MAX;
    }
    std::vector<Decoded> window;
    for (const Decoded& d : r.packets) {
      if (d.ts >= from && d.ts <= to) window.push_back(d);
    }
    const TrainOutcome outcome = match_train(train, sent, window, self);
    const nlohmann::json& m = rt.meta;
    const int n_train = m.value("load_packets", 0);
    const int group = m.value("group", 0);
    if (group != 0 && group != 1) throw bad_file(name, "a train record names no length group");
    tally.add(train, outcome, n_train, m.value("short_load_packets", n_train), group,
              m.value("sizing", false), m.value("packet_size", 0), res);
  }
  if (run.end.is_null()) {
    res.stop_reason = "incomplete";
    res.probe_packets = packets;
    res.probe_bytes = bytes;
  } else {
    res.stop_reason = run.end.value("stop_reason", "");
    res.elapsed_s = run.end.value("elapsed_s", 0.0);
    res.probe_packets = run.end.value("probe_packets", packets);
    res.probe_bytes = run.end.value("probe_bytes", bytes);
  }
  tally.finish(res, run.run.value("max_rate_bps", 1e9));
  const unsigned drops = run.end.is_null() ? 0 : run.end.value("capture_drops", 0u);
  if (drops > 0) {
    res.warnings.push_back(
        {"capture_drops", std::to_string(drops) + " packets dropped by the capture buffer"});
  }
  if (run.end.is_null()) {
    res.warnings.push_back(
        {"capture_incomplete", "the capture ends before the run did; the result covers the " +
                                   std::to_string(run.trains.size()) + " trains it holds"});
  }
  if (r.truncated) {
    res.warnings.push_back({"capture_truncated", "the capture file ends inside a packet record"});
  }
  return res;
}

}  // namespace

CapacityResult analyze_capacity(const OfflineRead& r, const std::string& name, bool verbose) {
  try {
    return analyze_records(r, name, verbose);
  } catch (const nlohmann::json::exception&) {
    // A note that parsed as JSON but holds the wrong types: a damaged file.
    throw bad_file(name, "a linkwidth run record is damaged (a field of the wrong type)");
  }
}

int run_analyze_main(const std::vector<std::string>& args) {
  bool json = false, verbose = false;
  std::string file;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--json" || a == "-J") {
      json = true;
    } else if (a == "-v" || a == "--verbose") {
      verbose = true;
    } else if (a == "-h" || a == "--help") {
      std::cout << "usage: linkwidth analyze FILE [--json] [-v]\n"
                   "Re-runs the estimators on a capture written by --save-pcap (capacity runs)\n"
                   "and prints the live command's result document.\n";
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      std::cerr << "linkwidth: analyze: unknown option '" << a
                << "'; usage: linkwidth analyze FILE [--json] [-v]." << std::endl;
      return static_cast<int>(ExitCode::kUsage);
    } else if (file.empty()) {
      file = a;
    } else {
      std::cerr << "linkwidth: analyze takes one FILE." << std::endl;
      return static_cast<int>(ExitCode::kUsage);
    }
  }
  auto fail = [&](const std::string& code, const std::string& msg, ExitCode exit) {
    if (json) {
      std::cout << error_json("analyze", file, {code, msg}, nullptr).dump(2) << std::endl;
    }
    std::cerr << "linkwidth: " << msg << std::endl;
    return static_cast<int>(exit);
  };
  if (file.empty()) {
    return fail("usage", "no FILE given; usage: linkwidth analyze FILE [--json] [-v].",
                ExitCode::kUsage);
  }
  try {
    const CapacityResult res = analyze_capacity(read_pcap_file(file), file, verbose);
    if (json) {
      nlohmann::json doc = to_json(res);
      doc["offline"] = {{"pcap", file}};
      std::cout << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
    } else {
      std::cout << "analysed offline from " << file << "\n" << to_text(res);
    }
    return res.valid ? 0 : static_cast<int>(ExitCode::kRuntime);
  } catch (const Error& e) {
    std::string msg = e.what();
    msg = msg.substr(msg.find(": ") + 2);
    // Every failure to read the file is the file's fault: exit 2.
    return fail(e.code(), msg, ExitCode::kUsage);
  } catch (const std::exception& e) {
    return fail("bad_capture", file + ": cannot analyse: " + e.what(), ExitCode::kUsage);
  }
}

}  // namespace lw
