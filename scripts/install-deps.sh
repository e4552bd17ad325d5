#!/usr/bin/env bash
# Install everything linkwidth needs to build, test and run its namespace lab.
#
# Idempotent and non-interactive; meant for a fresh Debian 12 (bookworm) as
# root (or via sudo).  Runs `apt-get update` at most once, and only when some
# package is missing.  Safe to re-run.
#
#   sudo scripts/install-deps.sh
#
# Packages:
#   build:  build-essential cmake pkg-config libnet1-dev libpcap-dev
#           libboost-program-options-dev catch2 nlohmann-json3-dev libcap-dev
#           clang-format
#   lab:    iproute2 (ip, tc, ss), ethtool, iperf3, tcpdump, iputils-ping,
#           procps (sysctl), nftables (only for the optional "reject with
#           ICMP admin-prohibited" target firewall; the SYN-drop firewall and
#           everything else in scripts/lab.py uses tc only)
#           httperf (short-lived HTTP cross traffic in scripts/compare.py; the
#           web server is Python's http.server)
#   package and vantage points: help2man (the man page), dpkg-dev (cpack's
#           dpkg-shlibdeps), lintian, man-db (man -l), file, ansible-core,
#           openssh-server/-client (per-namespace sshd of the vantage lab; the
#           package's own daemon is kept from starting by policy-rc.d)
#   tests:  python3 python3-pytest python3-matplotlib (plots of compare.py and
#           plot_measure.py; also installed with pip for a python3 first on
#           PATH that cannot import the Debian one)
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config util-linux libcap2-bin
  libnet1-dev libpcap-dev libboost-program-options-dev catch2
  nlohmann-json3-dev libcap-dev clang-format clang libclang-rt-dev
  iproute2 ethtool iperf3 tcpdump iputils-ping procps nftables httperf
  python3 python3-pytest python3-matplotlib
  help2man dpkg-dev lintian man-db file ansible-core openssh-server openssh-client
)

if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    exec sudo -E "$0" "$@"
  fi
  echo "install-deps.sh: must run as root" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive

missing=()
for p in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "install-deps.sh: installing: ${missing[*]}"
  # iperf3's debconf question ("start as a daemon?") defaults to false.
  echo "iperf3 iperf3/start_daemon boolean false" | debconf-set-selections 2>/dev/null || true
  apt-get update -q
  # openssh-server would start a system-wide sshd: the lab starts its own,
  # per namespace, so no service may start during this install.
  policy=/usr/sbin/policy-rc.d
  made_policy=0
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && made_policy=1
  fi
  rc=0
  apt-get install -y -q --no-install-recommends "${missing[@]}" || rc=$?
  if ((made_policy)); then rm -f "$policy"; fi
  ((rc == 0)) || exit "$rc"
else
  echo "install-deps.sh: all Debian packages present"
fi

# pytest for the python3 first on PATH (may be a pyenv/venv python that does
# not see Debian's python3-pytest).
PY=$(command -v python3 || true)
if [[ -n "$PY" ]] && ! "$PY" -c 'import pytest' >/dev/null 2>&1; then
  echo "install-deps.sh: installing pytest for $PY"
  "$PY" -m pip install -q pytest || "$PY" -m pip install -q --break-system-packages pytest
fi

if [[ -n "$PY" ]] && ! "$PY" -c 'import matplotlib' >/dev/null 2>&1; then
  echo "install-deps.sh: installing matplotlib for $PY"
  "$PY" -m pip install -q matplotlib || "$PY" -m pip install -q --break-system-packages matplotlib
fi

echo "install-deps.sh: done"
