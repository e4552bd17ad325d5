// Command lines mapped to a parsed config, or to a required rejection.
#include <catch2/catch.hpp>

#include "app/frontends/cli.hpp"
#include "usage_rejection.hpp"
#include "linkwidth/error.hpp"

using namespace lw;

namespace {
using test::rejection;
}  // namespace

TEST_CASE("valid command lines", "[cli]") {
  const auto r = parse_cli({"capacity", "198.18.3.2", "--json", "-n", "40", "--port", "4000",
                            "--max-bytes", "2M", "--max-time", "5", "-i", "eth1"});
  CHECK(r.config.command == Command::kCapacity);
  CHECK(r.config.target == "198.18.3.2");
  CHECK(r.config.json);
  CHECK(r.config.load_packets == 40);
  CHECK(r.config.port == 4000);
  CHECK(r.config.max_bytes == 2000000);
  CHECK(r.config.max_time_s == 5);
  CHECK(r.config.interface == "eth1");
  CHECK(parse_cli({"help"}).show_help);
  CHECK(parse_cli({"version"}).show_version);
  CHECK(parse_cli({"capacity", "--help"}).show_help);
  const auto defaults = parse_cli({"capacity", "example.org"}).config;
  CHECK(defaults.packet_size == 1500);
  CHECK(defaults.load_packets == 0);
  CHECK(defaults.length_ratio == 2.0);
}

TEST_CASE("bad command lines are rejected with one clear sentence", "[cli]") {
  struct Case {
    std::vector<std::string> args;
    std::string expect;
  } cases[] = {
      {{}, "no command"},
      {{"frobnicate", "x"}, "unknown command 'frobnicate'"},
      {{"capacity"}, "no TARGET"},
      {{"capacity", "a", "b"}, "only one TARGET"},
      {{"capacity", "x", "--port", "70000"}, "--port must be between 1 and 65535"},
      {{"capacity", "x", "--port", "-1"}, "--port must be between"},
      {{"capacity", "x", "--port", "http"}, "port"},
      {{"capacity", "x", "--packet-size", "9000"}, "--packet-size must be between 64 and 1500"},
      {{"capacity", "x", "--packet-size", "20"}, "--packet-size"},
      {{"capacity", "x", "--trains", "0"}, "--trains must be between 1 and 1000"},
      {{"capacity", "x", "--load-packets", "-3"}, "--load-packets"},
      {{"capacity", "x", "--max-time", "-1"}, "--max-time"},
      {{"capacity", "x", "--max-time", "nan"}, "--max-time"},
      {{"capacity", "x", "--max-bytes", "12Q"}, "unknown unit"},
      {{"capacity", "x", "--max-bytes", "lots"}, "not a number"},
      {{"capacity", "x", "--max-load", "0.9"}, "--max-load"},
      {{"capacity", "x", "--min-trains", "50", "--trains", "10"}, "--min-trains cannot exceed"},
      {{"capacity", "x", "--bogus"}, "bogus"},
      {{"capacity", "x", "--length-ratio", "0.5"}, "--length-ratio"},
      {{"capacity", "x", "--max-load-packets", "1"}, "--max-load-packets must be at least"},
      {{"measure", "x", "--max-load-packets", "3", "--length-ratio", "3.5"},
       "--max-load-packets must be at least --length-ratio"},
  };
  for (const auto& c : cases) {
    const std::string msg = rejection(c.args);
    INFO("args: " << ::Catch::Detail::stringify(c.args) << " -> " << msg);
    CHECK(msg.find(c.expect) != std::string::npos);
    CHECK(msg.find('\n') == std::string::npos);
  }
}

TEST_CASE("SI suffixes", "[cli]") {
  CHECK(parse_si("50M", "x") == 50e6);
  CHECK(parse_si("1.5G", "x") == 1.5e9);
  CHECK(parse_si("10k", "x") == 10e3);
  CHECK(parse_si("100Mbit", "x") == 100e6);
  CHECK(parse_si("7", "x") == 7);
  CHECK_THROWS_AS(parse_si("", "x"), UsageError);
}

#include "app/plumbing/net.hpp"

TEST_CASE("targets no probe may be sent to", "[net]") {
  CHECK(forbidden_target_reason(0x7f000001).find("loopback") != std::string::npos);
  CHECK(forbidden_target_reason(0).find("unspecified") != std::string::npos);
  CHECK(forbidden_target_reason(0xE0000001).find("multicast") != std::string::npos);
  CHECK(forbidden_target_reason(0xffffffff).find("broadcast") != std::string::npos);
  CHECK(forbidden_target_reason(0xF0000001).find("reserved") != std::string::npos);
  CHECK(forbidden_target_reason(0xC6120202).empty());
  CHECK(resolve_ipv4("198.18.3.2") == 0xC6120302);
  CHECK_THROWS_AS(resolve_ipv4("no-such-host.invalid"), Error);
}
