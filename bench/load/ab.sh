#!/usr/bin/env bash
# A/B comparison of two variants of a server with sluice load, alternating
# the order of the variants from round to round (A B, then B A, ...), so
# that drift of the machine (a warming cache, a noisy neighbour, thermal
# throttling) does not always favour the variant that runs first.
#
# Usage (from the repository root):
#   bench/load/ab.sh URL_A URL_B ROUNDS OUTDIR [sluice load flags...]
# e.g.
#   bench/load/ab.sh http://127.0.0.1:8080/ http://127.0.0.1:8081/ 4 ab --rate 2000 --duration 20s
#
# Writes OUTDIR/a-ROUND.json and OUTDIR/b-ROUND.json, an overlay of the
# first round (OUTDIR/ab.html, aligned on elapsed time) and prints each
# round's ok/s and ok p99 per variant in the order they ran.
set -euo pipefail
if [ $# -lt 4 ]; then
  sed -n '2,16p' "$0" >&2
  exit 2
fi
a=$1 b=$2 rounds=$3 out=$4
shift 4
mkdir -p "$out"
bin=$(mktemp -d)/sluice
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -o "$bin" ./cmd/sluice
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then order="a b"; else order="b a"; fi
  for v in $order; do
    url=$a; [ "$v" = b ] && url=$b
    "$bin" load "$url" --live off --out "$out/$v-$r.json" "$@" >/dev/null || true
    printf 'round %d %s: ' "$r" "$v"
    # report exits with the run's verdict (3 for INVALID): print the figures anyway.
    { "$bin" report "$out/$v-$r.json" || true; } | awk '/^ +0 /{print "ok/s " $10 "  ok p99 " $12; exit}'
  done
done
"$bin" report --html "$out/ab.html" "$out/a-1.json" "$out/b-1.json" >/dev/null || true
echo "overlay: $out/ab.html"
