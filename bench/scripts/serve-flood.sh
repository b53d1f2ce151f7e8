#!/usr/bin/env bash
# serve-flood.sh: does admitted work still finish while a flood of
# refusals saturates the server's core? `sluice serve` with its only disk
# slot held (a slow client streams a large file), a closed-loop flood of
# cold reads that the disk gate refuses (wrk -c$FLOOD_CONNS on its own
# core, as fast as the server answers), and beside it a probe: cache hits
# at a fixed rate (`sluice load --rate $PROBE_RATE`), whose success and
# p99 are the admitted work's. The same on net/http (--engine net) and on
# nginx (return 503 for the cold file, the hot file from disk), in
# interleaved rounds.
#
#   bench/scripts/serve-flood.sh
#   ROUNDS=5 FLOOD_CONNS=2000 PROBE_RATE=500 bench/scripts/serve-flood.sh
set -euo pipefail
source "$(dirname "$0")/static-common.sh"
DURATION=${DURATION:-6s}
ROUNDS=${ROUNDS:-3}
FLOOD_CONNS=${FLOOD_CONNS:-2000}
PROBE_RATE=${PROBE_RATE:-500}
SLOW_PID=
FLOOD_PID=

stop_slow() {
	for p in $SLOW_PID $FLOOD_PID; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	SLOW_PID= FLOOD_PID=
}
trap 'stop_slow; cleanup' EXIT INT TERM
ulimit -n 65536 2>/dev/null || true

start_sluice_full() {
	GOMAXPROCS=1 taskset -c "$SERVER_CPUS" "$WORK/sluice" serve --addr "127.0.0.1:$PORT" --admin-addr "127.0.0.1:$ADMIN_PORT" \
		--root "$SITE" --max-inflight 1 --max-conns 10000 --engine "$1" --log-level warn >"$WORK/server.log" 2>&1 &
	SERVER_PID=$!
	wait_ready # reads /index.html into the cache
	taskset -c "$WRK_CPUS" curl -s -o /dev/null --limit-rate 1k "http://127.0.0.1:$PORT/large.bin" &
	SLOW_PID=$!
	# Wait for the stream to hold the slot before asking for the cold
	# file: asked earlier, it would be read and cached.
	for _ in $(seq 1 100); do
		if curl -s "http://127.0.0.1:$ADMIN_PORT/state" | grep -q '"inflight": 1'; then
			[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/page.html")" = 503 ] && return 0
		fi
		sleep 0.05
	done
	echo "the disk gate never filled" >&2
	exit 1
}

start_nginx_flood() {
	local dir=$WORK/nginxflood
	mkdir -p "$dir/tmp"
	cat >"$dir/nginx.conf" <<CONF
worker_processes 1;
worker_rlimit_nofile 65536;
daemon off;
master_process on;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 20000; }
http {
    include /etc/nginx/mime.types;
    access_log off;
    sendfile on;
    open_file_cache max=10000 inactive=60s;
    keepalive_timeout 65s;
    keepalive_requests 100000000;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    server {
        listen 127.0.0.1:$PORT;
        root $SITE;
        location = /page.html {
            add_header Retry-After 1 always;
            default_type application/json;
            return 503 '{"error":"BUSY","gate":"disk","reason":"full"}\n';
        }
    }
}
CONF
	taskset -c "$SERVER_CPUS" nginx -p "$dir" -c "$dir/nginx.conf" >"$WORK/server.log" 2>&1 &
	SERVER_PID=$!
	wait_ready
}

build_servers
make_site
machine_line
echo "flood: wrk -t1 -c$FLOOD_CONNS on a refused cold file; probe: sluice load --rate $PROBE_RATE on a cached file; $DURATION, $ROUNDS interleaved rounds"
echo
printf '%-8s %5s %12s %10s %9s %10s\n' server round refusals/s probe_ok% probe_p99 cpu_us/ans
declare -A OK P99
for round in $(seq 1 "$ROUNDS"); do
	for server in fast net nginx; do
		case $server in
		nginx) start_nginx_flood ;;
		*) start_sluice_full "$server" ;;
		esac
		before=$(server_cpu_ticks)
		taskset -c "$WRK_CPUS" wrk -t1 -c"$FLOOD_CONNS" -d"$DURATION" --timeout 5s "http://127.0.0.1:$PORT/page.html" >"$WORK/flood.txt" 2>&1 &
		FLOOD_PID=$!
		sleep 1
		taskset -c "$WRK_CPUS" "$WORK/sluice" load --url "http://127.0.0.1:$PORT/index.html" --rate "$PROBE_RATE" \
			--duration "$(( ${DURATION%s} - 2 ))s" --workers 256 --timeout 2s --p99-budget 2s --live off --out "$WORK/probe.json" >/dev/null 2>&1 || true
		wait "$FLOOD_PID" 2>/dev/null || true
		FLOOD_PID=
		after=$(server_cpu_ticks)
		line=$(python3 - "$WORK/probe.json" "$WORK/flood.txt" "$((after - before))" "$(getconf CLK_TCK)" <<'PY'
import json, re, sys
w = json.load(open(sys.argv[1]))["steps"][0]["windows"][-1]
c = w["counts"]
flood = open(sys.argv[2]).read()
n = int(re.search(r"(\d+) requests in", flood).group(1))
secs = float(re.search(r"requests in ([\d.]+)s", flood).group(1))
answers = n + c["ok"] + c["refused"]
cpu = int(sys.argv[3]) / int(sys.argv[4]) * 1e6 / max(answers, 1)
print(f'{n/secs:.0f} {100*c["ok"]/max(c["sent"],1):.1f} {w["latency"]["ok_response_time"].get("p99_ms", 0):.1f} {cpu:.1f}')
PY
)
		read -r rps okp p99 cpu <<<"$line"
		printf '%-8s %5d %12s %10s %9s %10s\n' "$server" "$round" "$rps" "$okp" "$p99" "$cpu"
		OK[$server]="${OK[$server]:-} $okp"
		P99[$server]="${P99[$server]:-} $p99"
		stop_slow
		stop_server
	done
done
echo
for server in fast net nginx; do
	echo "$server: probe ok% median $(median ${OK[$server]}), probe p99 median $(median ${P99[$server]}) ms"
done
