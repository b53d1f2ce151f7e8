#!/usr/bin/env bash
# refusal-cost.sh: server CPU per response of a gate refusal (503 from
# httpgate.Guard on a full gate) against the cheapest 200 on the same
# server, in the same run (target: refusal <= 1.1x).
#
# The server (bench/httpgate/server) runs pinned to SERVER_CPUS with
# GOMAXPROCS=1, wrk pinned to WRK_CPUS. Rounds alternate the routes; each
# run reads the server's CPU time (utime+stime from /proc/PID/stat, the
# same clock as process_cpu_seconds_total) before and after, and divides
# by the responses wrk counted. Prints per-run figures, medians and ratios.
#
# Usage: bench/scripts/refusal-cost.sh            (defaults below)
#        ROUNDS=7 DURATION=10s CONNS=32 bench/scripts/refusal-cost.sh
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SERVER_CPUS=${SERVER_CPUS:-0}
WRK_CPUS=${WRK_CPUS:-1}
PORT=${PORT:-18451}
ADMIN_PORT=${ADMIN_PORT:-18452}
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-32}
ROUTES=${ROUTES:-"ok refuse gated"}

need() { command -v "$1" >/dev/null || { echo "missing tool: $1" >&2; exit 2; }; }
need go; need wrk; need curl; need taskset

WORK=$(mktemp -d "${TMPDIR:-/tmp}/sluice-refusal.XXXXXX")
SERVER_PID=
cleanup() {
	if [ -n "$SERVER_PID" ]; then
		kill "$SERVER_PID" 2>/dev/null || true
		wait "$SERVER_PID" 2>/dev/null || true
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

(cd "$REPO/bench" && go build -o "$WORK/server" ./httpgate/server)
GOMAXPROCS=1 taskset -c "$SERVER_CPUS" "$WORK/server" -addr "127.0.0.1:$PORT" -admin-addr "127.0.0.1:$ADMIN_PORT" \
	>"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do
	curl -q --noproxy '*' -s -o /dev/null "http://127.0.0.1:$ADMIN_PORT/healthz" && break
	sleep 0.05
done

# Check each route answers what it should before measuring it.
check() {
	local path=$1 want=$2 got
	got=$(curl -q --noproxy '*' -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/$path")
	[ "$got" = "$want" ] || { echo "/$path answered $got, want $want" >&2; exit 1; }
}
check ok 200
check gated 200
check refuse 503
check canned 503

TICKS=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$SERVER_PID/stat"; }

# run ROUTE -> prints "requests cpu_seconds"
run() {
	local route=$1 before after out reqs
	before=$(cpu_ticks)
	out=$(taskset -c "$WRK_CPUS" wrk -t1 -c"$CONNS" -d"$DURATION" "http://127.0.0.1:$PORT/$route")
	after=$(cpu_ticks)
	reqs=$(awk '/requests in/ {print $1}' <<<"$out")
	echo "$reqs $(awk -v a="$after" -v b="$before" -v t="$TICKS" 'BEGIN {printf "%.2f", (a-b)/t}')"
}

median() { sort -g | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else printf "%.3f\n", (v[NR/2]+v[NR/2+1])/2}'; }

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores; server on cpu $SERVER_CPUS (GOMAXPROCS=1), wrk -t1 -c$CONNS -d$DURATION on cpu $WRK_CPUS; $ROUNDS rounds"
# A run counts only if the server was saturated (busy >= SATURATED of the
# wall time): an idle-ish server spends extra CPU per response on wake-ups,
# which measures the machine's other load, not the response.
SATURATED=${SATURATED:-0.9}
printf '%-7s %5s %10s %9s %10s %6s %12s\n' route round responses rps cpu_s busy us/response
declare -A PER ALL
for r in $(seq 1 "$ROUNDS"); do
	for route in $ROUTES; do
		read -r reqs cpu < <(run "$route")
		secs=${DURATION%s}
		us=$(awk -v c="$cpu" -v n="$reqs" 'BEGIN {printf "%.2f", c*1e6/n}')
		busy=$(awk -v c="$cpu" -v s="$secs" 'BEGIN {printf "%.2f", c/s}')
		mark=""
		if awk -v b="$busy" -v t="$SATURATED" 'BEGIN {exit !(b >= t)}'; then
			PER[$route]+="$us "
		else
			mark="  (not saturated: excluded)"
		fi
		ALL[$route]+="$us "
		printf '%-7s %5d %10d %9d %10s %6s %12s%s\n' "$route" "$r" "$reqs" $((reqs / secs)) "$cpu" "$busy" "$us" "$mark"
	done
done

echo
echo "median server CPU per response (us), saturated runs [all runs]:"
for route in $ROUTES; do
	n=$(tr ' ' '\n' <<<"${PER[$route]:-}" | grep -c . || true)
	if [ "$n" -lt 3 ]; then
		echo "  $route: only $n saturated runs; the machine is too busy to judge (rerun when quieter)"
		exit 3
	fi
	m=$(tr ' ' '\n' <<<"${PER[$route]}" | grep . | median)
	a=$(tr ' ' '\n' <<<"${ALL[$route]}" | grep . | median)
	printf '  %-7s %s  [%s]  (%d saturated runs)\n' "$route" "$m" "$a" "$n"
	eval "MED_$route=$m"
done
ratio=$(awk -v a="$MED_refuse" -v b="$MED_ok" 'BEGIN {printf "%.3f", a/b}')
echo "refusal / cheapest 200 = $ratio (target <= 1.1)"
if [ -n "${MED_gated:-}" ]; then
	echo "admitted 200 through Guard / cheapest 200 = $(awk -v a="$MED_gated" -v b="$MED_ok" 'BEGIN {printf "%.3f", a/b}')"
fi
awk -v r="$ratio" 'BEGIN {exit !(r <= 1.1)}' && echo "PASS" || { echo "FAIL: refusal costs more than 1.1x the cheapest 200"; exit 1; }
