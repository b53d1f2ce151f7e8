#!/usr/bin/env bash
# cliff.sh reproduces the cliff table of seed 000: wrk keep-alive on one
# cached file at increasing concurrency, requests/s and the share of 503,
# for --gate-scope request (the seed's bug) and --gate-scope disk (the fix),
# with --work-limit 16 and --work-limit 1.
#
# Part 2 repeats the ladder while the disk is busy: 16 clients stream a
# 4 MiB file (over the cache limit, so always read from disk) through the
# benchmark server's slow-disk hook (1 ms per 32 KiB read), keeping the 16
# slots of the gate mostly taken, as real disk work does.
#
#   bench/scripts/cliff.sh                 # 4 s per step
#   DURATION=3s CONCS="16 64 200" bench/scripts/cliff.sh
#
# The server is not pinned by default (SERVER_CPUS=0,1: both cores, as a
# deployment would run it), and neither is wrk.
#
# Target: disk scope at every concurrency >= 0.95x its own rate at 16, with
# 0 refusals; request scope refuses hits once more requests than slots are
# inside the gate.
set -euo pipefail
SERVER_CPUS=${SERVER_CPUS:-0,1}
WRK_CPUS=${WRK_CPUS:-0,1}
source "$(dirname "$0")/static-common.sh"
DURATION=${DURATION:-4s}
CONCS=${CONCS:-"16 24 32 48 64 100 200"}
PARTS=${PARTS:-"hits busy-disk"}

build_servers
make_site
machine_line
echo "wrk -t1 -c<conc> -d$DURATION --timeout 5s http://127.0.0.1:$PORT/index.html (keep-alive, file cached after one warm-up GET)"
echo
status=0
ladder() { # PART LIMIT SCOPE
	local part=$1 limit=$2 scope=$3 bg=
	if [ "$part" = busy-disk ]; then
		SLOW_READ=1ms start_sluice "$scope" "$limit"
		echo "### busy disk: --gate-scope $scope --work-limit $limit, 16 background streams of /large.bin"
		taskset -c "$WRK_CPUS" wrk -t1 -c16 -d1h --timeout 10s "http://127.0.0.1:$PORT/large.bin" >/dev/null 2>&1 &
		bg=$!
		sleep 1
	else
		start_sluice "$scope" "$limit"
		echo "### --gate-scope $scope --work-limit $limit"
	fi
	echo
	echo "| concurrency | requests/s | 503 % | vs own rate at 16 | server CPU µs/request |"
	echo "|---:|---:|---:|---:|---:|"
	local base= c rps bad total cpu pct ratio
	check_200 /index.html
	for c in $CONCS; do
		read -r rps bad total cpu < <(run_wrk "$c" "$DURATION" /index.html)
		pct=$(awk -v b="$bad" -v t="$total" 'BEGIN {printf "%.1f", t ? 100*b/t : 0}')
		base=${base:-$rps}
		ratio=$(awk -v r="$rps" -v b="$base" 'BEGIN {printf "%.2f", r/b}')
		echo "| $c | $(printf '%.0f' "$rps") | $pct | ${ratio}x | $cpu |"
		if [ "$scope" = disk ] && [ "$part" = hits ]; then
			if [ "$bad" != 0 ] || awk -v x="$ratio" 'BEGIN {exit !(x < 0.95)}'; then
				echo "  ^ MISSED TARGET (disk scope: >= 0.95x and 0 refusals)" >&2
				status=1
			fi
		fi
	done
	echo
	if [ -n "$bg" ]; then
		kill "$bg" 2>/dev/null || true
		wait "$bg" 2>/dev/null || true
	fi
	stop_server
}
for part in $PARTS; do
	case $part in
	hits) for limit in 16 1; do for scope in request disk; do ladder hits $limit $scope; done; done ;;
	busy-disk) for scope in request disk; do ladder busy-disk 16 $scope; done ;;
	*) echo "unknown part $part" >&2; exit 2 ;;
	esac
done
exit $status
