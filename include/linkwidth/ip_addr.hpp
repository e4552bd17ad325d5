#pragma once
// One IP address of either family, as plain data for plan/send/capture/match.
//
//   IpAddr a = IpAddr::parse("2001:2:0:1::2").value();   // or IpAddr(0xC6120001u)
//   if (a.is_v6()) ... a.bytes6() ... a.str();
//
// An IPv4 address converts implicitly from its host-order uint32_t, so the
// IPv4 code paths (and their tests) keep their literals; an IPv6 address is
// 16 bytes in network order. The default value is the IPv4 0.0.0.0, which
// every caller treats as "no address" (is_zero / explicit bool).
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace lw {

class IpAddr {
 public:
  IpAddr() = default;
  // Host-order IPv4 (implicit on purpose, see above).
  IpAddr(std::uint32_t v4_host_order);  // NOLINT(google-explicit-constructor)
  static IpAddr v6(const std::array<std::uint8_t, 16>& network_order);
  // 16 bytes in network order at `p` (the decoder's view of a header).
  static IpAddr v6_from(const std::uint8_t* p);
  // An IPv4 or IPv6 literal (no zone, no brackets); nullopt otherwise.
  static std::optional<IpAddr> parse(const std::string& text);

  // The zone of a scoped IPv6 address (fe80::1%eth0: the interface index; 0
  // for none). It says where the address is used, not which address it is:
  // ==, < and hash ignore it, so a captured reply (no zone on the wire)
  // equals the scoped target it comes from. Set only by net.cpp's
  // resolve_target (a link-local literal with a zone) and find_route.
  std::uint32_t scope_id() const { return scope_; }
  IpAddr with_scope(std::uint32_t scope_id) const {
    IpAddr r = *this;
    r.scope_ = v6_ ? scope_id : 0;
    return r;
  }
  // fe80::/10 (IPv6 unicast link-local; needs a zone to be used).
  bool is_link_local() const { return v6_ && b_[0] == 0xfe && (b_[1] & 0xc0) == 0x80; }

  int family() const { return v6_ ? 6 : 4; }
  bool is_v4() const { return !v6_; }
  bool is_v6() const { return v6_; }
  // Host-order IPv4 address; 0 for an IPv6 address.
  std::uint32_t v4() const;
  // Network-order bytes of an IPv6 address (all zero for IPv4).
  const std::array<std::uint8_t, 16>& bytes6() const { return b_; }
  bool is_zero() const;
  explicit operator bool() const { return !is_zero(); }
  // Dotted quad or RFC 5952 text (inet_ntop), without the zone.
  std::string str() const;

  friend bool operator==(const IpAddr& a, const IpAddr& b) {
    return a.v6_ == b.v6_ && a.b_ == b.b_;
  }
  friend bool operator!=(const IpAddr& a, const IpAddr& b) { return !(a == b); }
  friend bool operator<(const IpAddr& a, const IpAddr& b) {
    return a.v6_ != b.v6_ ? b.v6_ : a.b_ < b.b_;
  }
  std::size_t hash() const;

 private:
  bool v6_ = false;
  // IPv4: bytes 0..3 hold the address (network order), the rest zero.
  std::array<std::uint8_t, 16> b_{};
  std::uint32_t scope_ = 0;
};

struct IpAddrHash {
  std::size_t operator()(const IpAddr& a) const { return a.hash(); }
};

// IP header bytes for the family of `a`: 20 (IPv4 without options) or 40.
inline int ip_header_len(const IpAddr& a) { return a.is_v6() ? 40 : 20; }
// A bare TCP segment's IP length (the markers): 40 over IPv4, 60 over IPv6.
inline std::uint16_t bare_tcp_len(const IpAddr& a) {
  return static_cast<std::uint16_t>(ip_header_len(a) + 20);
}

}  // namespace lw

template <>
struct std::hash<lw::IpAddr> {
  std::size_t operator()(const lw::IpAddr& a) const { return a.hash(); }
};
