// The pcap reading path (capture/offline_capture) on the fuzz seeds: pcap in
// both byte orders, micro- and nanosecond, pcapng, a truncated file, garbage.
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

#include "capture/offline_capture.hpp"
#include "linkwidth/error.hpp"

using namespace lw;

namespace {

const std::string kCorpus = std::string(LW_FUZZ_CORPUS_DIR) + "/";

// A seed without its leading mode byte, read as the fuzz target reads it.
OfflineRead read_seed(const std::string& name) {
  std::ifstream in(kCorpus + name, std::ios::binary);
  REQUIRE(in);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(bytes.size() > 1);
  static std::vector<char> keep;  // fmemopen reads from it until read_pcap returns
  keep.assign(bytes.begin() + 1, bytes.end());
  std::FILE* f = fmemopen(keep.data(), keep.size(), "rb");
  REQUIRE(f);
  return read_pcap(f, name);
}

}  // namespace

TEST_CASE("pcap files decode into the same records as live frames", "[offline]") {
  const OfflineRead us = read_seed("pcap_eth_us");
  CHECK(us.dlt == 1);
  REQUIRE(us.packets.size() == 2);
  CHECK_FALSE(us.truncated);
  CHECK(us.packets[0].tcp_flags == 0x02);
  CHECK(us.packets[1].tcp_flags == 0x14);
  CHECK(us.packets[1].ack == 0x89abcdf0);
  CHECK(us.packets[0].ts == 1700000000LL * kSec + 123456LL * 1000);  // µs scaled to ns

  const OfflineRead ns = read_seed("pcap_raw_ns");
  REQUIRE(ns.packets.size() == 2);
  CHECK(ns.packets[0].ts == 1700000000LL * kSec + 123456);
  CHECK(ns.packets[0].icmp_type == 11);
  CHECK(ns.packets[0].quote.seq == 0x89abcdef);
  CHECK(ns.packets[1].icmp_mtu == 1400);

  const OfflineRead be = read_seed("pcap_sll_big_endian");
  REQUIRE(be.packets.size() == 1);
  CHECK(be.packets[0].sport == 47391);

  const OfflineRead ng = read_seed("pcapng_eth");
  REQUIRE(ng.packets.size() == 2);
  CHECK(ng.packets[1].ts == 1700000001LL * kSec);

  const OfflineRead cut = read_seed("pcap_truncated");
  CHECK(cut.packets.size() == 1);
  CHECK(cut.truncated);
}

TEST_CASE("files that are not pcap are refused with an error", "[offline]") {
  CHECK_THROWS_AS(read_seed("frame_eth_rst_ack"), Error);
  try {
    read_pcap_file("/nonexistent/x.pcap");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == "unreadable_file");
    CHECK(std::string(e.what()).find("No such file") != std::string::npos);
  }
}
