#!/usr/bin/env bash
# cliff.sh reproduces the cliff table: wrk keep-alive on one
# cached file at increasing concurrency, requests/s and the share of 503,
# for --gate-scope request (the bug) and --gate-scope disk (the fix),
# with --max-inflight 16 and --max-inflight 1.
#
# Part 2 (busy-disk) repeats the ladder while the disk is busy: 16 clients
# stream a 4 MiB file (over the cache limit, so always read from disk)
# through the benchmark server's slow-disk hook (1 ms per 32 KiB read),
# keeping the 16 slots of the gate mostly taken, as real disk work does.
#
#   bench/scripts/cliff.sh                       # 3 rounds of 4 s per cell
#   ROUNDS=1 DURATION=3s CONCS="16 64 200" PARTS=hits bench/scripts/cliff.sh
#
# Rounds are interleaved (every configuration once, then again) and each
# cell is the median of its rounds, so a burst of load from other processes
# on the machine moves one sample, not a whole column. The server is not
# pinned by default (SERVER_CPUS=0,1: both cores, as a deployment would run
# it), and neither is wrk.
#
# Target: disk scope at every concurrency >= 0.95x its own rate at 16, with
# 0 refusals; request scope refuses cache hits.
set -euo pipefail
SERVER_CPUS=${SERVER_CPUS:-0,1}
WRK_CPUS=${WRK_CPUS:-0,1}
source "$(dirname "$0")/static-common.sh"
DURATION=${DURATION:-4s}
ROUNDS=${ROUNDS:-3}
CONCS=${CONCS:-"16 24 32 48 64 100 200"}
PARTS=${PARTS:-"hits busy-disk"}

build_servers
make_site
machine_line
echo "wrk -t1 -c<conc> -d$DURATION --timeout 5s http://127.0.0.1:$PORT/index.html (keep-alive, file cached after one warm-up GET); median of $ROUNDS interleaved rounds"
echo

configs=()
for part in $PARTS; do
	case $part in
	hits) configs+=("hits 16 request" "hits 16 disk" "hits 1 request" "hits 1 disk") ;;
	busy-disk) configs+=("busy-disk 16 request" "busy-disk 16 disk") ;;
	*) echo "unknown part $part" >&2; exit 2 ;;
	esac
done

declare -A RPS BAD TOTAL CPU
# ladder PART LIMIT SCOPE: one round of the concurrency ladder.
ladder() {
	local part=$1 limit=$2 scope=$3 key c rps bad total cpu
	if [ "$part" = busy-disk ]; then
		SLOW_READ=1ms start_sluice "$scope" "$limit"
		check_200 /index.html
		taskset -c "$WRK_CPUS" wrk -t1 -c16 -d1h --timeout 10s "http://127.0.0.1:$PORT/large.bin" >/dev/null 2>&1 &
		BG_PID=$!
		sleep 1
	else
		start_sluice "$scope" "$limit"
		check_200 /index.html
	fi
	for c in $CONCS; do
		read -r rps bad total cpu < <(run_wrk "$c" "$DURATION" /index.html)
		key="$part $limit $scope $c"
		RPS[$key]="${RPS[$key]:-} $rps"
		BAD[$key]="${BAD[$key]:-} $(awk -v b="$bad" -v t="$total" 'BEGIN {printf "%.2f", t ? 100*b/t : 0}')"
		CPU[$key]="${CPU[$key]:-} $cpu"
	done
	stop_bg
	stop_server
}

for round in $(seq 1 "$ROUNDS"); do
	for cfg in "${configs[@]}"; do
		ladder $cfg
	done
done

status=0
for cfg in "${configs[@]}"; do
	read -r part limit scope <<<"$cfg"
	if [ "$part" = busy-disk ]; then
		echo "### busy disk: --gate-scope $scope --max-inflight $limit, 16 background streams of /large.bin"
	else
		echo "### --gate-scope $scope --max-inflight $limit"
	fi
	echo
	echo "| concurrency | requests/s | 503 % | vs own rate at 16 | server CPU µs/request | rounds (requests/s) | rounds (503 %) |"
	echo "|---:|---:|---:|---:|---:|---|---|"
	base=
	for c in $CONCS; do
		key="$part $limit $scope $c"
		rps=$(median ${RPS[$key]})
		bad=$(median ${BAD[$key]})
		maxbad=$(printf '%s\n' ${BAD[$key]} | sort -g | tail -1)
		base=${base:-$rps}
		ratio=$(awk -v r="$rps" -v b="$base" 'BEGIN {printf "%.2f", r/b}')
		echo "| $c | $(printf '%.0f' "$rps") | $bad | ${ratio}x | $(median ${CPU[$key]}) |$(printf ' %.0f' ${RPS[$key]}) |${BAD[$key]} |"
		if [ "$scope" = disk ] && [ "$part" = hits ]; then
			if awk -v m="$maxbad" 'BEGIN {exit !(m > 0)}' || awk -v x="$ratio" 'BEGIN {exit !(x < 0.95)}'; then
				echo "  ^ MISSED TARGET (disk scope: >= 0.95x and 0 refusals)" >&2
				status=1
			fi
		fi
	done
	echo
done
exit $status
