// `linkwidth sweep`, the pure parts: the command line, the target list, the
// resume state, the records, progress and summary text.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "app/frontends/sweep.hpp"
#include "app/frontends/sweep_run.hpp"
#include "linkwidth/error.hpp"
#include "usage_rejection.hpp"

using namespace lw;
using nlohmann::json;

namespace {
std::string rejection(const std::vector<std::string>& args) {
  return test::usage_rejection([&] { parse_sweep_cli(args); });
}

std::string list_rejection(const std::string& text) {
  std::istringstream in(text);
  try {
    parse_targets(in, "capacity");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

json record(const std::string& target, const std::string& mode, int exit_code,
            bool interrupted = false) {
  json s = {{"target", target}, {"mode", mode}, {"index", 1}, {"exit_code", exit_code}};
  if (interrupted) s["interrupted"] = true;
  return {{"type", mode}, {"target", target}, {"sweep", s}};
}
}  // namespace

TEST_CASE("sweep command line: own options and pass-through", "[sweep]") {
  const auto o =
      parse_sweep_cli({"sweep", "--targets", "t.txt", "--output=o.jsonl", "--resume", "--max-time",
                       "2", "--port", "4000", "--json", "--mode", "measure", "--pause", "0.5",
                       "--target-time", "9", "-q", "--summary", "s.csv"});
  CHECK(o.targets == "t.txt");
  CHECK(o.output == "o.jsonl");
  CHECK(o.resume);
  CHECK(o.quiet);
  CHECK(o.mode == "measure");
  CHECK(o.pause_s == 0.5);
  CHECK(o.target_time_s == 9);
  CHECK(o.summary == "s.csv");
  // --json is dropped (every child gets it); the rest goes to the children.
  CHECK(o.child_args == std::vector<std::string>{"--max-time", "2", "--port", "4000"});
  CHECK(parse_sweep_cli({"sweep", "--help"}).show_help);
  CHECK(parse_sweep_cli({"sweep", "--targets", "-", "--output", "o"}).mode == "capacity");
}

TEST_CASE("sweep command line rejections", "[sweep]") {
  CHECK_THAT(rejection({"sweep", "--output", "o"}), Catch::Contains("needs --targets"));
  CHECK_THAT(rejection({"sweep", "--targets", "t"}), Catch::Contains("needs --output"));
  CHECK_THAT(rejection({"sweep", "--targets", "t", "--output", "-"}),
             Catch::Contains("must be a file"));
  CHECK_THAT(rejection({"sweep", "--targets", "t", "--output", "o", "--mode", "fast"}),
             Catch::Contains("--mode must be"));
  CHECK_THAT(rejection({"sweep", "--targets", "t", "--output", "o", "--pause", "-1"}),
             Catch::Contains("--pause"));
  CHECK_THAT(rejection({"sweep", "--targets", "t", "--output", "o", "--target-time", "x"}),
             Catch::Contains("target-time"));
  CHECK_THAT(rejection({"sweep", "--targets", "t", "--output", "o", "--dry-run"}),
             Catch::Contains("no --dry-run"));
  CHECK_THAT(rejection({"sweep", "--targets", "t", "--output", "o", "--save-pcap", "x"}),
             Catch::Contains("--save-pcap cannot"));
}

TEST_CASE("pass-through options are checked per mode, budget from --max-time", "[sweep]") {
  auto o = parse_sweep_cli({"sweep", "--targets", "t", "--output", "o", "--max-time", "3"});
  CHECK(child_config(o, "capacity").max_time_s == 3);
  CHECK(target_budget_s(o, child_config(o, "capacity")) == 3 + o.kill_margin_s);
  o = parse_sweep_cli({"sweep", "--targets", "t", "--output", "o"});
  CHECK(target_budget_s(o, child_config(o, "capacity")) == 20 + o.kill_margin_s);
  CHECK(target_budget_s(o, child_config(o, "measure")) == 30 + o.kill_margin_s);
  o = parse_sweep_cli({"sweep", "--targets", "t", "--output", "o", "--target-time", "7"});
  CHECK(target_budget_s(o, child_config(o, "capacity")) == 7);
  // A bad measurement option stops the sweep before anything runs.
  o = parse_sweep_cli({"sweep", "--targets", "t", "--output", "o", "--max-time", "0"});
  CHECK_THROWS_WITH(child_config(o, "capacity"),
                    Catch::Contains("capacity targets: --max-time must be"));
  o = parse_sweep_cli({"sweep", "--targets", "t", "--output", "o", "--capacity", "10M"});
  CHECK_NOTHROW(child_config(o, "availbw"));
  CHECK_THROWS_WITH(child_config(o, "capacity"), Catch::Contains("--capacity only applies"));
  o = parse_sweep_cli({"sweep", "--targets", "t", "--output", "o", "198.18.1.2"});
  CHECK_THROWS_WITH(child_config(o, "capacity"), Catch::Contains("targets go in --targets"));
}

TEST_CASE("target list: comments, modes, duplicates", "[sweep]") {
  std::istringstream in(
      "# a sweep\n"
      "198.18.3.2\n"
      "\n"
      "  198.18.1.2   measure   # the first router\r\n"
      "example.net hops\n"
      "198.18.3.2 capacity\n"  // the same as line 2
      "198.18.3.2 availbw\n");
  int dup = -1;
  const auto t = parse_targets(in, "capacity", &dup);
  REQUIRE(t.size() == 4);
  CHECK(t[0].target == "198.18.3.2");
  CHECK(t[0].mode == "capacity");
  CHECK(t[0].line == 2);
  CHECK(t[1].target == "198.18.1.2");
  CHECK(t[1].mode == "measure");
  CHECK(t[1].line == 4);
  CHECK(t[2].mode == "hops");
  CHECK(t[3].mode == "availbw");
  CHECK(t[3].line == 7);
  CHECK(dup == 1);
  std::istringstream in2("198.18.3.2\n");
  CHECK(parse_targets(in2, "measure")[0].mode == "measure");
  std::istringstream empty("# nothing\n\n");
  CHECK(parse_targets(empty, "capacity").empty());
}

TEST_CASE("target list rejections name the line", "[sweep]") {
  CHECK_THAT(list_rejection("198.18.3.2\n198.18.3.3 fast\n"),
             Catch::Contains("line 2: unknown mode 'fast'"));
  CHECK_THAT(list_rejection("# x\n\n198.18.3.2 capacity extra\n"),
             Catch::Contains("line 3: expected 'TARGET [MODE]'"));
  CHECK_THAT(list_rejection("--port 80\n"), Catch::Contains("line 1: target '--port'"));
}

TEST_CASE("resume: done records, a cut-off last line, unfinished records", "[sweep]") {
  const json a = record("198.18.1.2", "capacity", 0);
  const json b = record("no-such-host.invalid", "capacity", 2);  // an error is a result
  const json c = record("198.18.3.2", "capacity", 130, true);    // interrupted
  const json d = record("198.18.4.2", "measure", 3);             // no privileges
  SECTION("a complete file") {
    std::istringstream in(record_line(a) + "\n" + record_line(b) + "\n");
    const auto st = load_resume(in);
    CHECK(st.records.size() == 2);
    CHECK(st.done.count({"198.18.1.2", "capacity"}));
    CHECK(st.done.count({"no-such-host.invalid", "capacity"}));
    CHECK_FALSE(st.done.count({"198.18.1.2", "measure"}));
    CHECK_FALSE(st.needs_rewrite);
  }
  SECTION("a crash mid-write") {
    const std::string line = record_line(b);
    std::istringstream in(record_line(a) + "\n" + line.substr(0, line.size() / 2));
    const auto st = load_resume(in);
    CHECK(st.records.size() == 1);
    CHECK(st.dropped_truncated == 1);
    CHECK(st.needs_rewrite);
    CHECK_FALSE(st.done.count({"no-such-host.invalid", "capacity"}));
  }
  SECTION("a complete last record without its newline is kept") {
    std::istringstream in(record_line(a) + "\n" + record_line(b));
    const auto st = load_resume(in);
    CHECK(st.records.size() == 2);
    CHECK(st.dropped_truncated == 0);
    CHECK(st.needs_rewrite);
  }
  SECTION("interrupted and privilege failures are measured again") {
    std::istringstream in(record_line(a) + "\n" + record_line(c) + "\n" + record_line(d) + "\n" +
                          record_line(a) + "\n");
    const auto st = load_resume(in);
    CHECK(st.records.size() == 1);
    CHECK(st.dropped_unfinished == 3);  // c, d, and a's repeat
    CHECK(st.needs_rewrite);
    CHECK_FALSE(st.done.count({"198.18.3.2", "capacity"}));
    CHECK_FALSE(st.done.count({"198.18.4.2", "measure"}));
  }
  SECTION("damage before the last line is refused") {
    std::istringstream in(record_line(a) + "\n{\"type\":\n" + record_line(b) + "\n");
    CHECK_THROWS_WITH(load_resume(in), Catch::Contains("line 2 of the output is not"));
  }
  SECTION("an empty file") {
    std::istringstream in("");
    const auto st = load_resume(in);
    CHECK(st.records.empty());
    CHECK_FALSE(st.needs_rewrite);
  }
}

TEST_CASE("records: the child's document plus sweep metadata, errors always valid", "[sweep]") {
  const SweepTarget t{"198.18.3.2", "capacity", 4};
  ChildOutcome o;
  o.out = "{\n  \"type\": \"capacity\",\n  \"capacity_bps\": 49520000.0\n}\n";
  o.exit_code = 0;
  o.elapsed_s = 1.5;
  json r = make_record(t, 3, "2026-11-22T06:00:00Z", o, 30);
  CHECK(r["capacity_bps"] == 49520000.0);
  CHECK_FALSE(r.contains("error"));
  CHECK(r["sweep"]["index"] == 3);
  CHECK(r["sweep"]["line"] == 4);
  CHECK(r["sweep"]["target"] == "198.18.3.2");
  CHECK(r["sweep"]["mode"] == "capacity");
  CHECK(r["sweep"]["exit_code"] == 0);
  CHECK(r["sweep"]["started_at"] == "2026-11-22T06:00:00Z");
  CHECK(record_is_done(r));
  CHECK(record_status(r) == "ok");
  const std::string line = record_line(r);
  CHECK(line.find('\n') == std::string::npos);
  CHECK(json::parse(line) == r);

  // The child's own error document stays as it is.
  o.out = R"({"type":"capacity","error":{"code":"target_filtered","message":"filtered"}})";
  o.exit_code = 1;
  r = make_record(t, 1, "", o, 30);
  CHECK(record_status(r) == "target_filtered");

  // Failed without saying why: an error is added.
  o.out = R"({"type":"capacity","capacity_bps":null,"stop_reason":"max_time"})";
  r = make_record(t, 1, "", o, 30);
  CHECK(record_status(r) == "measurement_failed");
  CHECK(r["error"]["message"] == "linkwidth capacity exited with code 1, stop_reason max_time");

  // No document at all (a crash).
  o.out = "{\"type\": \"capa";
  o.exit_code = -1;
  o.term_signal = 11;
  o.err_tail = "oops";
  r = make_record(t, 1, "", o, 30);
  CHECK(record_status(r) == "no_result");
  CHECK_THAT(r["error"]["message"].get<std::string>(), Catch::Contains("signal 11"));
  CHECK_THAT(r["error"]["message"].get<std::string>(), Catch::Contains("oops"));
  CHECK(r["sweep"]["exit_code"].is_null());
  CHECK(r["sweep"]["signal"] == 11);
  CHECK(r["target"] == "198.18.3.2");

  // Over budget: the partial document with a target_timeout error.
  o = ChildOutcome{};
  o.out = R"({"type":"capacity","trains_sent":3,"stop_reason":"interrupted"})";
  o.exit_code = 143;
  o.timed_out = true;
  r = make_record(t, 1, "", o, 12);
  CHECK(record_status(r) == "target_timeout");
  CHECK(r["trains_sent"] == 3);
  CHECK(record_is_done(r));

  // Interrupted by the user: the partial document, measured again on resume.
  o.timed_out = false;
  o.interrupted = true;
  o.exit_code = 130;
  r = make_record(t, 1, "", o, 12);
  CHECK(r["sweep"]["interrupted"] == true);
  CHECK_FALSE(record_is_done(r));

  // Invalid UTF-8 in a target cannot break the line.
  const SweepTarget bad{"\xff\xfe", "capacity", 1};
  o = ChildOutcome{};
  r = make_record(bad, 1, "", o, 12);
  CHECK_NOTHROW(json::parse(record_line(r)));
}

TEST_CASE("durations, ETA and the progress line", "[sweep]") {
  CHECK(format_duration(0) == "0:00");
  CHECK(format_duration(75) == "1:15");
  CHECK(format_duration(3725) == "1:02:05");
  CHECK(format_duration(NAN) == "--:--");
  CHECK(format_duration(-1) == "--:--");
  CHECK(std::isnan(eta_s(10, 0, 5)));
  CHECK(eta_s(10, 2, 3) == Approx(15));
  const SweepTarget t{"198.18.3.2", "capacity", 1};
  CHECK(progress_line(2, 10, t, 75, 300) == "[2/10] 198.18.3.2 capacity  elapsed 1:15  ETA 5:00");
  CHECK(progress_line(0, 10, t, 0, NAN) == "[0/10] 198.18.3.2 capacity  elapsed 0:00  ETA --:--");
}

TEST_CASE("summary: table and CSV", "[sweep]") {
  json ok = record("198.18.1.2", "capacity", 0);
  ok["capacity_bps"] = 49520000.0;
  ok["sweep"]["elapsed_s"] = 2.0;
  json bad = record("a,b\"c", "measure", 1);
  bad["error"] = {{"code", "target_filtered"}, {"message", "target filtered"}};
  bad["sweep"]["index"] = 2;
  const auto table = summary_table({ok, bad});
  CHECK_THAT(table, Catch::Contains("198.18.1.2"));
  CHECK_THAT(table, Catch::Contains("49.52 Mbit/s"));
  CHECK_THAT(table, Catch::Contains("target_filtered"));
  CHECK_THAT(table, Catch::Contains("2 targets, 1 ok, 1 failed"));
  const auto csv = summary_csv({ok, bad});
  CHECK(csv ==
        "index,target,mode,status,capacity_bps,availbw_bps,bottleneck_hop,elapsed_s,exit_code\n"
        "1,198.18.1.2,capacity,ok,49520000,,,2,0\n"
        "2,\"a,b\"\"c\",measure,target_filtered,,,,,1\n");
}

// The process layer, with this test binary as the child (/proc/self/exe):
// the hidden test case below plays a measurement that prints a document and
// then hangs.
TEST_CASE("sweep child stand-in: prints a document, then hangs", "[.sweep_child]") {
  std::printf("{\"type\": \"capacity\", \"trains_sent\": 1}\n");
  std::fflush(stdout);
  std::fprintf(stderr, "linkwidth: hanging on purpose\n");
  for (int i = 0; i < 300; ++i) usleep(100000);
}

TEST_CASE("run_child: exit code, output, budget and forwarded stop", "[sweep]") {
  std::atomic<bool> no_stop{false};
  // A quick child: the test list (Catch v2 exits with the number listed).
  ChildOutcome o = run_child({"x", "--list-test-names-only", "[.sweep_child]"}, 10, no_stop);
  CHECK(o.exit_code == 1);
  CHECK_THAT(o.out, Catch::Contains("sweep child stand-in"));
  CHECK_FALSE(o.timed_out);
  // Over budget: SIGTERM, the document so far, a target_timeout record.
  int ticks = 0;
  o = run_child({"x", "[.sweep_child]"}, 1.2, no_stop, [&](double) { ++ticks; });
  CHECK(o.timed_out);
  CHECK(o.elapsed_s < 1.2 + 6);
  CHECK(ticks >= 1);
  CHECK_THAT(o.out, Catch::Contains("\"trains_sent\": 1"));
  CHECK(o.err_tail.find("hanging on purpose") != std::string::npos);
  const json r = make_record({"198.18.3.2", "capacity", 1}, 1, "", o, 1.2);
  CHECK(record_status(r) == "target_timeout");
  CHECK(record_is_done(r));
  // A stop request is passed on at once.
  std::atomic<bool> stop{true};
  o = run_child({"x", "[.sweep_child]"}, 60, stop);
  CHECK(o.interrupted);
  CHECK_FALSE(o.timed_out);
  CHECK(o.elapsed_s < 6);
}
