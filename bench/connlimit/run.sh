#!/usr/bin/env bash
# Cost of a connection refused by connlimit vs one served, measured as the
# server's CPU time per response (utime+stime from /proc/PID/stat) under
# wrk with a new connection per request (Connection: close).
#
# Usage (from the repository root): bench/connlimit/run.sh [ROUNDS] [SECONDS]
# The server is pinned to CPU 0 and wrk to CPU 1 (2-core machine).
set -euo pipefail
rounds=${1:-3}
secs=${2:-5}
cd "$(dirname "$0")/.."            # the bench module
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/connlimit-bench" ./connlimit
hz=$(getconf CLK_TCK)

measure() { # mode -> prints "mode requests non2xx sockerr cpu_s us_per_resp"
	local mode=$1
	mkfifo "$tmp/in.$mode"
	taskset -c 0 "$tmp/connlimit-bench" -mode "$mode" <"$tmp/in.$mode" >"$tmp/out.$mode" &
	local pid=$!
	exec 9>"$tmp/in.$mode"
	local addr=""
	for _ in $(seq 100); do
		addr=$(sed -n 's/^ADDR //p' "$tmp/out.$mode")
		[ -n "$addr" ] && break
		sleep 0.05
	done
	[ -n "$addr" ] || { echo "server ($mode) did not start" >&2; exit 1; }
	local t0 t1
	t0=$(awk '{print $14+$15}' "/proc/$pid/stat")
	taskset -c 1 wrk -t1 -c16 -d"${secs}s" -H 'Connection: close' "http://$addr/" >"$tmp/wrk.$mode"
	t1=$(awk '{print $14+$15}' "/proc/$pid/stat")
	exec 9>&-
	wait "$pid"
	rm -f "$tmp/in.$mode"
	local reqs non2xx sockerr
	reqs=$(awk '/requests in/ {print $1}' "$tmp/wrk.$mode")
	non2xx=$(awk '/Non-2xx/ {print $NF}' "$tmp/wrk.$mode")
	sockerr=$(awk '/Socket errors/ {gsub(",",""); print $4+$6+$8+$10}' "$tmp/wrk.$mode")
	awk -v m="$mode" -v r="$reqs" -v n="${non2xx:-0}" -v e="${sockerr:-0}" -v dt="$((t1 - t0))" -v hz="$hz" \
		'BEGIN { printf "%-12s %9d %9d %6d %8.2f %10.2f\n", m, r, n, e, dt/hz, dt/hz/r*1e6 }'
}

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores, go $(go env GOVERSION), wrk -t1 -c16 -d${secs}s -H 'Connection: close'"
printf "%-12s %9s %9s %6s %8s %10s\n" mode requests non2xx sockerr cpu_s us/resp
for r in $(seq "$rounds"); do
	for mode in plain served refused refused_fast; do
		measure "$mode" | tee -a "$tmp/results"
	done
done
awk '
	{ v[$1] = v[$1] " " $6; n[$1]++; c[$1, n[$1]] = $6 }
	function median(s,   a, k, i, j, t) {
		k = split(s, a, " ")
		for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
		return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
	}
	END {
		p = median(v["plain"]); s = median(v["served"]); f = median(v["refused"]); q = median(v["refused_fast"])
		printf "median server CPU per response (us): plain %.2f  served %.2f  refused %.2f  refused_fast %.2f\n", p, s, f, q
		for (r = 1; r <= n["served"]; r++) {
			rf = rf " " c["refused", r] / c["served", r]
			rq = rq " " c["refused_fast", r] / c["served", r]
			sp = sp " " c["served", r] / c["plain", r]
		}
		printf "median of per-round ratios: refused/served %.2f  refused_fast/served %.2f  served/plain %.2f\n", median(rf), median(rq), median(sp)
	}' "$tmp/results"
