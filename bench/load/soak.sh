#!/usr/bin/env bash
# Memory soak: sluice load at 10,000 req/s for 5.5 minutes against the trivial
# server; prints the driver's RSS every 10 s and the 1 min vs 5 min figures.
# Usage: bench/load/soak.sh [rate] [seconds]   (run from the repository root)
set -euo pipefail
rate=${1:-10000}
secs=${2:-330}
tmp=$(mktemp -d)
trap 'kill $srv 2>/dev/null || true; rm -rf "$tmp"' EXIT
go build -o "$tmp/sluice" ./cmd/sluice
(cd bench && go build -o "$tmp/trivial" ./load/trivial)
"$tmp/trivial" -addr 127.0.0.1:18081 & srv=$!
sleep 0.5
"$tmp/sluice" load --url http://127.0.0.1:18081/ --rate "$rate" --duration "${secs}s" --live off --out "$tmp/soak.json" >"$tmp/out.txt" &
drv=$!
t=0
declare -A rss
while kill -0 $drv 2>/dev/null; do
  kb=$(awk '/VmRSS/{print $2}' /proc/$drv/status 2>/dev/null || echo 0)
  [ -n "$kb" ] && rss[$t]=$kb && echo "t=${t}s rss_kb=$kb"
  sleep 10; t=$((t + 10))
done
wait $drv || true
cat "$tmp/out.txt"
a=${rss[60]:-0}; b=${rss[300]:-0}
echo "rss_1min_kb=$a rss_5min_kb=$b delta_kb=$((b - a))"
