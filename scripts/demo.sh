#!/usr/bin/env bash
# One command on a fresh machine (as root): install, build, build the lab,
# measure capacity, bottleneck hop and avail-bw under cross traffic, print
# truth beside estimate, tear the lab down.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec python3 scripts/demo.py "$@"
