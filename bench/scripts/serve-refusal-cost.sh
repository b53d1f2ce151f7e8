#!/usr/bin/env bash
# serve-refusal-cost.sh: server CPU per answer of `sluice serve`'s
# disk-gate refusal (503 with Retry-After and the JSON reason) on its
# HTTP/1.1 engine (fast) and on net/http (--engine net), beside nginx
# answering the same 503 with `return 503` (one worker), in the same run,
# with ratios to nginx. The floor of the same 503 on fasthttp's server
# and on net/http (bench/engine/canned: a handler that writes it and does
# nothing else) is measured beside them, and a cache hit on each.
#
# How the gate is kept full: `sluice serve --max-inflight 1 --cache-bytes 0`
# and one slow client (curl --limit-rate 1k) streaming a 4 MiB file: a
# gated stream holds the only slot for its whole duration, so every GET of
# a small file is a cold read refused at the gate (checked before each run).
#
# Each server is pinned to SERVER_CPUS with GOMAXPROCS=1 (nginx: one
# worker), wrk to WRK_CPUS; CPU is utime+stime from /proc per answer wrk
# counted. Rounds are interleaved; medians and ratios are printed.
#
# SYSCALLS=1 also counts the server's reads (read, recvfrom) and writes
# (write, writev) per answer with perf's syscall tracepoints (needs perf
# and the permission to trace the server).
#
#   bench/scripts/serve-refusal-cost.sh
#   ROUNDS=5 DURATION=5s CONNS=256 bench/scripts/serve-refusal-cost.sh
#   SYSCALLS=1 ROUNDS=1 bench/scripts/serve-refusal-cost.sh
set -euo pipefail
source "$(dirname "$0")/static-common.sh"
DURATION=${DURATION:-5s}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-256}
SLOW_PID=

stop_slow() {
	if [ -n "$SLOW_PID" ]; then
		kill "$SLOW_PID" 2>/dev/null || true
		wait "$SLOW_PID" 2>/dev/null || true
		SLOW_PID=
	fi
}
trap 'stop_slow; cleanup' EXIT INT TERM

# start_nginx503: nginx answering every request with the refusal sluice
# writes (same status, headers and body).
start_nginx503() {
	need nginx
	local dir=$WORK/nginx503
	mkdir -p "$dir/tmp"
	cat >"$dir/nginx.conf" <<CONF
worker_processes 1;
daemon off;
master_process on;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_timeout 65s;
    keepalive_requests 100000000;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    server {
        listen 127.0.0.1:$PORT;
        location / {
            add_header Retry-After 1 always;
            default_type application/json;
            return 503 '{"error":"BUSY","gate":"disk","reason":"full"}\n';
        }
    }
}
CONF
	taskset -c "$SERVER_CPUS" nginx -p "$dir" -c "$dir/nginx.conf" >"$WORK/server.log" 2>&1 &
	SERVER_PID=$!
	for _ in $(seq 1 100); do
		curl -s -o /dev/null "http://127.0.0.1:$PORT/" && return 0
		sleep 0.05
	done
	echo "nginx did not start" >&2
	exit 1
}

# start_full ENGINE: sluice serve with its only disk slot held by a slow
# stream, so that small files are refused.
start_full() {
	GOMAXPROCS=1 taskset -c "$SERVER_CPUS" "$WORK/sluice" serve --addr "127.0.0.1:$PORT" --admin-addr "127.0.0.1:$ADMIN_PORT" \
		--root "$SITE" --max-inflight 1 --cache-bytes 0 --engine "$1" --log-level warn >"$WORK/server.log" 2>&1 &
	SERVER_PID=$!
	for _ in $(seq 1 100); do
		curl -s -o /dev/null "http://127.0.0.1:$ADMIN_PORT/healthz" && break
		sleep 0.05
	done
	taskset -c "$WRK_CPUS" curl -s -o /dev/null --limit-rate 1k "http://127.0.0.1:$PORT/large.bin" &
	SLOW_PID=$!
	for _ in $(seq 1 100); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/page.html")" = 503 ] && return 0
		sleep 0.05
	done
	echo "the disk gate never filled" >&2
	exit 1
}

start_canned() {
	GOMAXPROCS=1 taskset -c "$SERVER_CPUS" "$WORK/canned" -server "$1" -addr "127.0.0.1:$PORT" >"$WORK/server.log" 2>&1 &
	SERVER_PID=$!
	for _ in $(seq 1 100); do
		curl -s -o /dev/null "http://127.0.0.1:$PORT/" && return 0
		sleep 0.05
	done
	echo "canned $1 did not start" >&2
	exit 1
}

start_hits() {
	GOMAXPROCS=1 taskset -c "$SERVER_CPUS" "$WORK/sluice" serve --addr "127.0.0.1:$PORT" --admin-addr "127.0.0.1:$ADMIN_PORT" \
		--root "$SITE" --engine "$1" --log-level warn >"$WORK/server.log" 2>&1 &
	SERVER_PID=$!
	wait_ready
}

SYSCALLS=${SYSCALLS:-0}
PERF_PID=
[ "$SYSCALLS" = 1 ] && need perf

# syscalls_start: count the server's reads and writes until syscalls_stop.
syscalls_start() {
	local pids
	pids=$(echo $SERVER_PID $(pgrep -P "$SERVER_PID" || true) | tr ' ' ,)
	perf stat -x, -e syscalls:sys_enter_read,syscalls:sys_enter_recvfrom,syscalls:sys_enter_write,syscalls:sys_enter_writev \
		-p "$pids" -o "$WORK/perf.txt" >/dev/null 2>&1 &
	PERF_PID=$!
	sleep 0.2
}

# syscalls_stop: stops the count (in this shell: perf is its child).
syscalls_stop() {
	kill -INT "$PERF_PID" 2>/dev/null || true
	wait "$PERF_PID" 2>/dev/null || true
	PERF_PID=
}

# syscalls_per_answer ANSWERS: reads/writes per answer ("2.00/1.00").
syscalls_per_answer() {
	awk -F, -v n="$1" '/sys_enter_(read|recvfrom),/ {r += $1} /sys_enter_(write|writev),/ {w += $1}
		END {printf "%.2f/%.2f", n ? r / n : 0, n ? w / n : 0}' "$WORK/perf.txt"
}

build_servers
(cd "$REPO/bench" && go build -o "$WORK/canned" ./engine/canned)
make_site
machine_line
echo "wrk -t1 -c$CONNS -d$DURATION, $ROUNDS interleaved rounds; CPU of the server process per answer (µs)"
echo
declare -A CPU RPS SYS
NAMES="refuse-fast refuse-net refuse-nginx canned-fasthttp canned-net hit-fast hit-net hit-nginx"
for round in $(seq 1 "$ROUNDS"); do
	for name in $NAMES; do
		want=503
		path=/page.html
		case $name in
		refuse-fast) start_full fast ;;
		refuse-net) start_full net ;;
		refuse-nginx) start_nginx503 ;;
		canned-fasthttp) start_canned fasthttp ;;
		canned-net) start_canned net ;;
		hit-fast) start_hits fast; want=200 ;;
		hit-net) start_hits net; want=200 ;;
		hit-nginx) start_nginx; want=200 ;;
		esac
		got=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT$path")
		[ "$got" = "$want" ] || { echo "$name: GET $path answered $got, want $want" >&2; exit 1; }
		[ "$SYSCALLS" = 1 ] && syscalls_start
		read -r rps _ total cpu < <(run_wrk "$CONNS" "$DURATION" "$path")
		if [ "$SYSCALLS" = 1 ]; then
			syscalls_stop
			SYS[$name]="${SYS[$name]:-} $(syscalls_per_answer "$total")"
		fi
		RPS[$name]="${RPS[$name]:-} $rps"
		CPU[$name]="${CPU[$name]:-} $cpu"
		stop_slow
		stop_server
	done
done
echo "| answer | CPU µs/answer (median) | rounds | / nginx's | requests/s (median) |"
echo "|---|---:|---|---:|---:|"
for name in $NAMES; do
	c=$(median ${CPU[$name]})
	case $name in
	hit-*) ref=$(median ${CPU[hit-nginx]}) ;;
	*) ref=$(median ${CPU[refuse-nginx]}) ;;
	esac
	echo "| $name | $c |${CPU[$name]} | $(awk -v a="$c" -v b="$ref" 'BEGIN {printf "%.2fx", a/b}') | $(printf '%.0f' "$(median ${RPS[$name]})") |"
done
if [ "$SYSCALLS" = 1 ]; then
	echo
	echo "system calls per answer, reads/writes (perf; while CPU was measured, so tracing costs are in the CPU figures of this run), each round:"
	for name in $NAMES; do echo "  $name:${SYS[$name]}"; done
fi
r=$(awk -v a="$(median ${CPU[refuse-fast]})" -v b="$(median ${CPU[refuse-nginx]})" 'BEGIN {printf "%.2f", a/b}')
echo
echo "refusal on the engine / nginx's 503 = $r (target <= 1.25)"
awk -v r="$r" 'BEGIN {exit !(r <= 1.25)}' && echo PASS || { echo "MISSED TARGET: the engine's refusal costs more than 1.25x nginx's"; exit 1; }
