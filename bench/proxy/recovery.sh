#!/usr/bin/env bash
# Recovery: the backend (16 slots x 20 ms) slows 3x for 10 s, starting
# 10 s into a 30 s open-loop run at 2x its capacity, then recovers. For
# each proxy: goodput before, during and after the slow phase, how many
# seconds after the backend recovered goodput is back to 95 % of its level
# before, and the refusals during the slow phase.
#
#   bench/proxy/recovery.sh      # PROXIES, RATE, DURATION to narrow it
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PROXIES=${PROXIES:-"sluice sluice-adaptive bare haproxy nginx caddy caddy-maxreq"}
RATE=${RATE:-1600}
DURATION=${DURATION:-30s}
export OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/sluice-proxy-recovery.XXXXXX")}
export BACKEND_FLAGS="-slow-from 10s -slow-for 10s -slow-factor 3"
# shellcheck source=/dev/null
ONLY_FUNCS=1 source "$HERE/run.sh"
echo "reports in $OUT"
printf '%-16s %9s %9s %9s %12s %14s %10s\n' proxy before/s slow/s after/s recovery_s refused_slow p99_ok_ms
for px in $PROXIES; do
	if peer "$px" && ! have "$px"; then echo "skip $px (not installed)"; continue; fi
	start_backend 20ms
	start_proxy "$px"
	taskset -c "$DRIVER_CPU" "$OUT/sluice" load --url "http://127.0.0.1:$PPORT/" --rate "$RATE" --duration "$DURATION" \
		--timeout 2s --workers 1024 --p99-budget 2s --live off --out "$OUT/recovery-$px.json" >/dev/null 2>&1 || true
	stop_all
	python3 - "$OUT/recovery-$px.json" "$px" <<'PY'
import json, sys, statistics
w = json.load(open(sys.argv[1]))["steps"][0]["windows"][0]
tl = w["timeline"]
p99 = w["latency"]["ok_response_time"].get("p99_ms", 0)
ok = [s["ok"] for s in tl]
before = statistics.median(ok[3:10])
slow = statistics.median(ok[11:20])
after = statistics.median(ok[24:]) if len(ok) > 24 else float("nan")
rec = next((i - 20 for i in range(20, len(ok)) if ok[i] >= 0.95 * before), None)
refused = sum(s["refused"] for s in tl[10:20])
print(f'{sys.argv[2]:<16} {before:9.0f} {slow:9.0f} {after:9.0f} {("%d" % rec) if rec is not None else "never":>12} {refused:14d} {p99:10.0f}')
PY
done
