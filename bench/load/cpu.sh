#!/usr/bin/env bash
# CPU per request of sluice load against vegeta attack, both with their
# default settings, at several open-loop rates against the trivial server:
# interleaved rounds (the order alternates), medians and the ratio, per rate.
# At rates a driver cannot keep, its achieved rate says so.
# Usage (from the repository root): bench/load/cpu.sh [rounds] [duration] [rates...]
set -euo pipefail
rounds=${1:-5}
dur=${2:-4s}
shift 2 2>/dev/null || true
rates=${*:-1000 5000 10000 20000}
tmp=$(mktemp -d)
srv=; trap '[ -n "$srv" ] && kill $srv 2>/dev/null || true; rm -rf "$tmp"' EXIT
go build -o "$tmp/sluice" ./cmd/sluice
(cd bench && go build -o "$tmp/trivial" ./load/trivial && go build -o "$tmp/compare" ./load/compare \
  && go build -o "$tmp/vegeta" github.com/tsenart/vegeta/v12)
"$tmp/trivial" -addr 127.0.0.1:18083 & srv=$!
sleep 0.5
for r in $rates; do
  echo "== $r req/s"
  "$tmp/compare" -sluice "$tmp/sluice" -vegeta "$tmp/vegeta" -url http://127.0.0.1:18083/ \
    -rate "$r" -duration "$dur" -rounds "$rounds"
done
