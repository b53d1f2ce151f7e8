#!/usr/bin/env bash
# Proxy comparison: sluice proxy vs a bare httputil.ReverseProxy vs HAProxy
# vs nginx in front of a backend of known capacity (16 slots x 20 ms = 800
# req/s), driven open-loop by `sluice load` at 1x, 2x, 5x and 10x that
# capacity; then a no-overload throughput round against a trivial backend.
#
#   bench/proxy/run.sh            # everything (about 6 minutes)
#   PROXIES="sluice bare" MULTS="1 5" DURATION=3s bench/proxy/run.sh
#
# Needs go, python3, taskset; haproxy and nginx (Debian: haproxy,
# nginx-light) are skipped when missing. Each proxy runs pinned to
# PROXY_CPU (one core, one thread/worker), the backend and the driver to
# DRIVER_CPU. ADAPTIVE overrides the adaptive variant's limit flags. Prints one line per (proxy, load) and writes the reports to
# $OUT (default: a temporary folder, printed).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PROXIES=${PROXIES:-"sluice sluice-adaptive bare haproxy nginx"}
MULTS=${MULTS:-"1 2 5 10"}
DURATION=${DURATION:-5s}
ROUNDS=${ROUNDS:-3}
PROXY_CPU=${PROXY_CPU:-0}
DRIVER_CPU=${DRIVER_CPU:-1}
BPORT=${BPORT:-19401}
PPORT=${PPORT:-19402}
APORT=${APORT:-19403}
CAPACITY=800 # 16 slots / 20 ms
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/sluice-proxy-bench.XXXXXX")}
mkdir -p "$OUT"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; PIDS=(); }
trap cleanup EXIT INT TERM

BACKEND_FLAGS=${BACKEND_FLAGS:-}
(cd "$REPO" && go build -o "$OUT/sluice" ./cmd/sluice)
(cd "$REPO/bench" && go build -o "$OUT/backend" ./proxy/backend && go build -o "$OUT/bare" ./proxy/bare)

wait_port() {
	for _ in $(seq 100); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		sleep 0.05
	done
	echo "port $1 never opened" >&2
	exit 1
}

start_backend() { # HOLD
	# shellcheck disable=SC2086 # BACKEND_FLAGS is a list of flags
	taskset -c "$DRIVER_CPU" "$OUT/backend" -addr "127.0.0.1:$BPORT" -slots 16 -hold "$1" $BACKEND_FLAGS &
	BACKEND_PID=$!
	PIDS+=("$BACKEND_PID")
	wait_port "$BPORT"
}

# start_proxy NAME: sets PROXY_PID (the process whose CPU is counted;
# nginx's master forks one worker, counted through its children).
start_proxy() {
	case $1 in
	sluice)
		taskset -c "$PROXY_CPU" env GOMAXPROCS=1 "$OUT/sluice" proxy --upstream "http://127.0.0.1:$BPORT" \
			--addr "127.0.0.1:$PPORT" --admin-addr "127.0.0.1:$APORT" --max-conns 10000 \
			--max-inflight 16 --queue 16 --max-wait 50ms --log-level warn &
		;;
	sluice-adaptive)
		taskset -c "$PROXY_CPU" env GOMAXPROCS=1 "$OUT/sluice" proxy --upstream "http://127.0.0.1:$BPORT" \
			--addr "127.0.0.1:$PPORT" --admin-addr "127.0.0.1:$APORT" --max-conns 10000 \
			--max-inflight 64 ${ADAPTIVE:---limit gradient2 --limit-min 8 --slo 100ms} --queue 16 --max-wait 50ms --log-level warn &
		;;
	bare)
		taskset -c "$PROXY_CPU" env GOMAXPROCS=1 "$OUT/bare" -addr "127.0.0.1:$PPORT" -upstream "http://127.0.0.1:$BPORT" &
		;;
	haproxy)
		cat >"$OUT/haproxy.cfg" <<CFG
global
	maxconn 8000
	nbthread 1
defaults
	mode http
	timeout connect 1s
	timeout client 10s
	timeout server 10s
	timeout queue 50ms
frontend fe
	bind 127.0.0.1:$PPORT
	default_backend be
backend be
	http-reuse always
	server s1 127.0.0.1:$BPORT maxconn 16
CFG
		taskset -c "$PROXY_CPU" haproxy -db -f "$OUT/haproxy.cfg" &
		;;
	nginx)
		mkdir -p "$OUT/nginx"
		cat >"$OUT/nginx.conf" <<CFG
worker_processes 1;
daemon off;
pid $OUT/nginx/nginx.pid;
error_log $OUT/nginx/error.log error;
events { worker_connections 20000; }
http {
	access_log off;
	client_body_temp_path $OUT/nginx;
	proxy_temp_path $OUT/nginx;
	limit_conn_zone \$server_name zone=upstream:1m;
	limit_conn_status 503;
	upstream be { server 127.0.0.1:$BPORT; keepalive 64; }
	server {
		listen 127.0.0.1:$PPORT;
		server_name bench;
		location / {
			limit_conn upstream 16;
			proxy_pass http://be;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
		}
	}
}
CFG
		taskset -c "$PROXY_CPU" nginx -c "$OUT/nginx.conf" &
		;;
	esac
	PROXY_PID=$!
	PIDS+=("$PROXY_PID")
	wait_port "$PPORT"
}

# cpu_ticks PID: user+system clock ticks of PID and its children threads
# (nginx: the master and its worker).
cpu_ticks() {
	local total=0 p
	for p in $1 $(pgrep -P "$1" || true); do
		read -r -a f <"/proc/$p/stat"
		total=$((total + f[13] + f[14]))
	done
	echo "$total"
}

have() { command -v "$1" >/dev/null; }

stop_all() { cleanup; sleep 0.3; }

if [ -n "${ONLY_FUNCS:-}" ]; then return 0; fi # sourced by recovery.sh
echo "reports in $OUT"
echo "== overload: backend 16 slots x 20 ms (capacity $CAPACITY/s), open loop, $DURATION per load"
printf '%-16s %5s %8s %9s %9s %10s %12s %8s\n' proxy load offered goodput refused p99_ok_ms cpu_us/resp dropped
for px in $PROXIES; do
	case $px in haproxy | nginx) have "$px" || { echo "skip $px (not installed)"; continue; } ;; esac
	for m in $MULTS; do
		start_backend 20ms
		start_proxy "$px"
		rate=$((CAPACITY * m))
		metrics=()
		case $px in sluice*) metrics=(--metrics "http://127.0.0.1:$APORT/metrics") ;; esac
		t0=$(cpu_ticks "$PROXY_PID")
		taskset -c "$DRIVER_CPU" "$OUT/sluice" load --url "http://127.0.0.1:$PPORT/" --rate "$rate" --duration "$DURATION" \
			--timeout 2s --workers 1024 --p99-budget 2s --live off "${metrics[@]}" --out "$OUT/$px-$m.json" >"$OUT/$px-$m.txt" 2>&1 || true
		t1=$(cpu_ticks "$PROXY_PID")
		stop_all
		python3 - "$OUT/$px-$m.json" "$px" "$m" "$((t1 - t0))" "$(getconf CLK_TCK)" <<'PY'
import json, sys
path, px, m, ticks, hz = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
w = json.load(open(path))["steps"][0]["windows"][0]
c, el = w["counts"], w["elapsed_s"]
answered = c["ok"] + c["refused"] + c["http_error"]
p99 = w["latency"]["ok_response_time"].get("p99_ms", 0)
cpu_us = ticks / hz * 1e6 / max(answered, 1)
print(f'{px:<16} {m+"x":>5} {c["sent"]/el:8.0f} {c["ok"]/el:9.0f} {c["refused"]/max(c["sent"],1):9.1%} {p99:10.1f} {cpu_us:12.0f} {c["dropped"]:8d}'
      + (f'  (timeouts/errors {c["transport_error"]+c["http_error"]})' if c["transport_error"]+c["http_error"] else ''))
PY
	done
done

echo "== no overload: trivial backend, closed loop 32 connections, $DURATION x $ROUNDS interleaved rounds"
for r in $(seq "$ROUNDS"); do
	for px in $PROXIES; do
		case $px in haproxy | nginx) have "$px" || continue ;; sluice-adaptive) continue ;; esac
		start_backend 0
		start_proxy "$px"
		taskset -c "$DRIVER_CPU" "$OUT/sluice" load --url "http://127.0.0.1:$PPORT/" --concurrency 32 --duration "$DURATION" \
			--timeout 2s --live off --out "$OUT/tput-$px-$r.json" >/dev/null 2>&1 || true
		stop_all
	done
done
python3 - "$OUT" $PROXIES <<'PY'
import json, sys, glob, statistics
out, pxs = sys.argv[1], [p for p in sys.argv[2:] if p != "sluice-adaptive"]
med = {}
for px in pxs:
    v = []
    for f in sorted(glob.glob(f"{out}/tput-{px}-*.json")):
        w = json.load(open(f))["steps"][0]["windows"][0]
        v.append(w["counts"]["ok"] / w["elapsed_s"])
    if v:
        med[px] = statistics.median(v)
        print(f"{px:<10} median {med[px]:8.0f} ok/s  rounds {' '.join(f'{x:.0f}' for x in v)}")
if "bare" in med:
    for px, v in med.items():
        print(f"{px:<10} / bare = {v / med['bare']:.2f}")
PY
