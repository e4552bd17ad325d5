#include "linkwidth/ip_addr.hpp"

#include <arpa/inet.h>

#include <cstring>

namespace lw {

IpAddr::IpAddr(std::uint32_t a) {
  b_[0] = static_cast<std::uint8_t>(a >> 24);
  b_[1] = static_cast<std::uint8_t>(a >> 16);
  b_[2] = static_cast<std::uint8_t>(a >> 8);
  b_[3] = static_cast<std::uint8_t>(a);
}

IpAddr IpAddr::v6(const std::array<std::uint8_t, 16>& b) {
  IpAddr r;
  r.v6_ = true;
  r.b_ = b;
  return r;
}

IpAddr IpAddr::v6_from(const std::uint8_t* p) {
  IpAddr r;
  r.v6_ = true;
  std::memcpy(r.b_.data(), p, 16);
  return r;
}

std::optional<IpAddr> IpAddr::parse(const std::string& text) {
  in_addr a4{};
  if (inet_pton(AF_INET, text.c_str(), &a4) == 1) return IpAddr(ntohl(a4.s_addr));
  in6_addr a6{};
  if (inet_pton(AF_INET6, text.c_str(), &a6) == 1) return v6_from(a6.s6_addr);
  return std::nullopt;
}

std::uint32_t IpAddr::v4() const {
  if (v6_) return 0;
  return (std::uint32_t{b_[0]} << 24) | (std::uint32_t{b_[1]} << 16) |
         (std::uint32_t{b_[2]} << 8) | std::uint32_t{b_[3]};
}

bool IpAddr::is_zero() const {
  for (auto x : b_) {
    if (x) return false;
  }
  return true;
}

std::string IpAddr::str() const {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (v6_) {
    inet_ntop(AF_INET6, b_.data(), buf, sizeof buf);
  } else {
    inet_ntop(AF_INET, b_.data(), buf, sizeof buf);
  }
  return buf;
}

std::size_t IpAddr::hash() const {
  // FNV-1a over family and bytes: small, stable, good enough for a few keys.
  std::size_t h = 1469598103934665603ull;
  h = (h ^ (v6_ ? 6u : 4u)) * 1099511628211ull;
  for (auto x : b_) h = (h ^ x) * 1099511628211ull;
  return h;
}

}  // namespace lw
