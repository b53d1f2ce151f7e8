#!/usr/bin/env bash
# sluice's pool vs ants and conc: submit+run of a trivial task, in
# interleaved rounds (each round runs every contender once, so machine
# noise lands on all of them), then medians with benchstat if installed.
# Usage: bench/pool/run.sh [rounds] [benchtime]   (from the repository root)
set -euo pipefail
rounds=${1:-6}
benchtime=${2:-0.3s}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd bench && go test -c -o "$tmp/pool.test" ./pool)
for i in $(seq "$rounds"); do
  "$tmp/pool.test" -test.run '^$' -test.bench . -test.benchtime "$benchtime" -test.count 1 | tee -a "$tmp/out.txt" >&2
done
if command -v benchstat >/dev/null 2>&1; then
  benchstat "$tmp/out.txt"
else
  cat "$tmp/out.txt"
fi
