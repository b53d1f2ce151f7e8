#!/usr/bin/env bash
# proxy-flood.sh: does admitted work still finish while a flood of
# refusals saturates the proxy's core? `sluice proxy` pinned to one core
# (GOMAXPROCS=1) in front of the 800/s backend (bench/proxy/backend: 16
# slots x 20 ms), with a route /flood whose own gate has one slot: a
# closed-loop flood on it (wrk -c$FLOOD_CONNS, as fast as the proxy
# answers) is almost all refused. Beside it a probe of admitted work,
# /probe at a fixed rate through the upstream gate (`sluice load --rate
# $PROBE_RATE`), whose success and p99 are what the flood costs it (a
# probe request is refused when its arrivals bunch past the upstream
# gate's 16 slots, or times out after 2 s; both are counted). On
# sluice's engine (--engine fast), on net/http (--engine net) and on nginx
# (one worker, limit_conn 1 on /flood and 16 on /probe, status 503), in
# interleaved rounds. ENGINES picks what runs: fast, net, nginx, and base (the
# fast engine of another build: BASELINE names its sluice binary, for a
# before/after comparison in the same rounds). PIPELINE=N makes each
# flood connection pipeline N requests at a time (a wrk script) instead
# of sending one and waiting for its answer.
#
#   bench/scripts/proxy-flood.sh
#   PIPELINE=64 BASELINE=/tmp/sluice-before ENGINES="fast base" bench/scripts/proxy-flood.sh
#   ROUNDS=5 FLOOD_CONNS=2000 PROBE_RATE=400 bench/scripts/proxy-flood.sh
set -euo pipefail
source "$(dirname "$0")/static-common.sh"
DURATION=${DURATION:-6s}
ROUNDS=${ROUNDS:-3}
FLOOD_CONNS=${FLOOD_CONNS:-2000}
PROBE_RATE=${PROBE_RATE:-400}
ENGINES=${ENGINES:-"fast net nginx"}
PIPELINE=${PIPELINE:-1}
BACKEND_PORT=${BACKEND_PORT:-18433}
BACKEND_PID=
FLOOD_PID=

stop_rest() {
	for p in $FLOOD_PID $BACKEND_PID; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	FLOOD_PID= BACKEND_PID=
}
trap 'stop_rest; cleanup' EXIT INT TERM
ulimit -n 65536 2>/dev/null || true

need go
need wrk
need curl
need taskset
(cd "$REPO" && go build -o "$WORK/sluice" ./cmd/sluice)
(cd "$REPO/bench" && go build -o "$WORK/backend" ./proxy/backend)
case " $ENGINES " in *" nginx "*) need nginx ;; esac
case " $ENGINES " in *" base "*)
	[ -x "${BASELINE:-}" ] || { echo "ENGINES has base: BASELINE must name a sluice binary" >&2; exit 2; } ;;
esac
WRK_SCRIPT=()
if [ "$PIPELINE" -gt 1 ]; then
	cat >"$WORK/pipeline.lua" <<LUA
init = function(args)
	local r = {}
	for i = 1, $PIPELINE do r[i] = wrk.format(nil) end
	req = table.concat(r)
end
request = function() return req end
LUA
	WRK_SCRIPT=(-s "$WORK/pipeline.lua")
fi
cat >"$WORK/routes.json" <<'JSON'
{"routes": [{"name": "flood", "path": "/flood", "max_inflight": 1}]}
JSON

# start_nginx: the same routes on nginx, one worker: limit_conn 1 on
# /flood and 16 on /probe (limit_conn_status 503), a keep-alive pool to
# the backend, nginx's default error log level (a refusal is logged).
start_nginx() {
	local dir=$WORK/nginx
	mkdir -p "$dir/tmp"
	cat >"$dir/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log error;
events { worker_connections 20000; }
http {
    access_log off;
    client_body_temp_path $dir/tmp;
    proxy_temp_path $dir/tmp;
    limit_conn_zone \$server_name zone=flood:1m;
    limit_conn_zone \$server_name zone=upstream:1m;
    limit_conn_status 503;
    upstream be { server 127.0.0.1:$BACKEND_PORT; keepalive 64; }
    server {
        listen 127.0.0.1:$PORT;
        server_name bench;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        location /flood { limit_conn flood 1; proxy_pass http://be; }
        location / { limit_conn upstream 16; proxy_pass http://be; }
    }
}
CONF
	taskset -c "$SERVER_CPUS" nginx -p "$dir" -c "$dir/nginx.conf" >"$WORK/server.log" 2>&1 &
	SERVER_PID=$!
}

start_proxy() {
	local bin=$WORK/sluice eng=$1
	[ "$1" = base ] && bin=$BASELINE eng=fast
	taskset -c "$WRK_CPUS" "$WORK/backend" -addr "127.0.0.1:$BACKEND_PORT" -slots 16 -hold 20ms &
	BACKEND_PID=$!
	if [ "$1" = nginx ]; then
		start_nginx
	else
		GOMAXPROCS=1 taskset -c "$SERVER_CPUS" "$bin" proxy --upstream "http://127.0.0.1:$BACKEND_PORT" \
			--addr "127.0.0.1:$PORT" --admin-addr "127.0.0.1:$ADMIN_PORT" --max-inflight 16 --max-conns 15000 \
			--config "$WORK/routes.json" --engine "$eng" --log-level warn >"$WORK/server.log" 2>&1 &
		SERVER_PID=$!
	fi
	for _ in $(seq 1 100); do
		if curl -fsS -o /dev/null "http://127.0.0.1:$PORT/probe" 2>/dev/null; then return 0; fi
		if ! kill -0 "$SERVER_PID" 2>/dev/null; then
			cat "$WORK/server.log" >&2
			exit 1
		fi
		sleep 0.1
	done
	echo "the proxy never answered" >&2
	exit 1
}

machine_line
echo "flood: wrk -t1 -c$FLOOD_CONNS$([ "$PIPELINE" -gt 1 ] && echo ", $PIPELINE pipelined") on /flood (a route gate of one slot); probe: sluice load --rate $PROBE_RATE on /probe; $DURATION, $ROUNDS interleaved rounds"
echo
printf '%-6s %5s %12s %10s %10s %10s %9s %10s\n' engine round refusals/s probe_ok% probe_503% probe_err% probe_p99 cpu_us/ans
declare -A OK P99 CPU
for round in $(seq 1 "$ROUNDS"); do
	for eng in $ENGINES; do
		start_proxy "$eng"
		before=$(server_cpu_ticks)
		taskset -c "$WRK_CPUS" wrk -t1 -c"$FLOOD_CONNS" -d"$DURATION" --timeout 5s "${WRK_SCRIPT[@]}" "http://127.0.0.1:$PORT/flood" >"$WORK/flood.txt" 2>&1 &
		FLOOD_PID=$!
		sleep 1
		taskset -c "$WRK_CPUS" "$WORK/sluice" load --url "http://127.0.0.1:$PORT/probe" --rate "$PROBE_RATE" \
			--duration "$((${DURATION%s} - 2))s" --workers 256 --timeout 2s --p99-budget 2s --live off --out "$WORK/probe.json" >/dev/null 2>&1 || true
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
bad = re.search(r"Non-2xx or 3xx responses: (\d+)", flood)
refused = int(bad.group(1)) if bad else 0
answers = n + c["ok"] + c["refused"]
cpu = int(sys.argv[3]) / int(sys.argv[4]) * 1e6 / max(answers, 1)
sent = max(c["sent"], 1)
print(f'{refused/secs:.0f} {100*c["ok"]/sent:.1f} {100*c["refused"]/sent:.1f} {100*(c["transport_error"]+c["http_error"])/sent:.1f} {w["latency"]["ok_response_time"].get("p99_ms", 0):.1f} {cpu:.1f}')
PY
)
		read -r rps okp refp errp p99 cpu <<<"$line"
		printf '%-6s %5d %12s %10s %10s %10s %9s %10s\n' "$eng" "$round" "$rps" "$okp" "$refp" "$errp" "$p99" "$cpu"
		OK[$eng]="${OK[$eng]:-} $okp"
		P99[$eng]="${P99[$eng]:-} $p99"
		CPU[$eng]="${CPU[$eng]:-} $cpu"
		stop_server
		stop_rest
	done
done
echo
for eng in $ENGINES; do
	echo "$eng: probe ok% median $(median ${OK[$eng]}), probe p99 median $(median ${P99[$eng]}) ms, CPU per answer median $(median ${CPU[$eng]}) us"
done
