#pragma once
// --dry-run: what a run would send, planned without privileges or sending
// (the target checked, the route looked up, the first train built and
// listed packet by packet, the schedule and the caps). report/plan_text.hpp
// renders the document as text.
#include <vector>

#include "app/plumbing/config.hpp"
#include "linkwidth/ip_addr.hpp"
#include "nlohmann/json.hpp"
#include "report/result.hpp"

namespace lw {

struct Route;
struct Train;

// The capacity run: the first train and the sizing, idle and stop rules.
nlohmann::json plan_capacity(const Config& c);
// The hops run: the TTL sweep and an example recursive train (4 hops), in
// the same shape as plan_capacity().
nlohmann::json plan_hops(const Config& c);

// The start of every --dry-run document: the checked target (lw::Error if
// forbidden) and the route, or a no_route warning when there is none.
nlohmann::json plan_header(const Config& c, IpAddr* dst, Route* route,
                           std::vector<Warning>* warnings);

// One train's packets as the document lists them.
nlohmann::json plan_packets_json(const Train& t);

}  // namespace lw
