#pragma once
// Reads the root qdisc of the interface our probes leave by (and, under a
// root htb, its classes and whether filters classify), over rtnetlink, for
// estimate/own_qdisc. Read once per run; nothing is changed.
#include <cstdint>
#include <string>

#include "estimate/own_qdisc.hpp"

namespace lw {

// An empty root_kind when the interface is not in this namespace or netlink
// would not answer (the caller then has no qdisc rate: never an error).
QdiscConfig read_qdisc_config(const std::string& ifname);

// Bytes queued in the root qdisc of `ifindex` now (its statistics), or -1
// when they cannot be read.
std::int64_t read_root_backlog(int ifindex);

}  // namespace lw
