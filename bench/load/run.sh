#!/usr/bin/env bash
# Side-by-side: sluice load vs vegeta attack at the same open-loop rate
# against the trivial server, CPU per request from each driver's rusage.
# Usage: bench/load/run.sh [rate] [duration] [rounds]   (from the repository root)
# Both drivers run with their default settings; compare -workers N pins both pools.
set -euo pipefail
rate=${1:-20000}
dur=${2:-10s}
rounds=${3:-3}
tmp=$(mktemp -d)
srv=; trap '[ -n "$srv" ] && kill $srv 2>/dev/null || true; rm -rf "$tmp"' EXIT
go build -o "$tmp/sluice" ./cmd/sluice
(cd bench && go build -o "$tmp/trivial" ./load/trivial && go build -o "$tmp/compare" ./load/compare \
  && go build -o "$tmp/vegeta" github.com/tsenart/vegeta/v12) # a tool directive in bench/go.mod keeps it
"$tmp/trivial" -addr 127.0.0.1:18082 & srv=$!
sleep 0.5
"$tmp/compare" -sluice "$tmp/sluice" -vegeta "$tmp/vegeta" -url http://127.0.0.1:18082/ \
  -rate "$rate" -duration "$dur" -rounds "$rounds"
