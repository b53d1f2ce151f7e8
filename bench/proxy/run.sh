#!/usr/bin/env bash
# Proxy comparison: sluice proxy vs a bare httputil.ReverseProxy vs HAProxy
# vs nginx vs Caddy in front of a backend of known capacity (16 slots x
# 20 ms = 800 req/s), driven open-loop by `sluice load` at 1x, 2x, 5x and
# 10x that capacity; then a no-overload throughput round (wrk -c32,
# interleaved rounds) against a trivial backend.
#
#   bench/proxy/run.sh            # everything (about 13 minutes)
#   PROXIES="sluice bare" MULTS="1 5" DURATION=3s bench/proxy/run.sh
#   PART=tput ROUNDS=7 bench/proxy/run.sh   # only the throughput rounds
#   PART=tput TPUT_CONNS=128 bench/proxy/run.sh  # the same at another operating point
#   PART=tail PROXIES="sluice-noqueue nginx haproxy" MULTS="5 10" DURATION=8s bench/proxy/run.sh
#                                            # interleaved overload rounds, medians and ratios
#   PART=goals bench/proxy/run.sh            # the receive-livelock goals (about 20 minutes):
#       30x and 50x with 2,000 and 6,000 client connections (cliff), CPU per
#       refusal with the gate full (refusal) and per proxied response without
#       overload (tput), for sluice-fast, sluice-net, bare-gate and nginx,
#       ROUNDS=3 interleaved rounds, each figure's median and its ratio to
#       nginx's in the same rounds, and whether each goal is met. PART=cliff,
#       PART=refusal and PART=tput run one part.
#
# Needs go, python3, taskset; haproxy, nginx and wrk (Debian: haproxy,
# nginx-light, wrk) are skipped when missing. Caddy is built on demand from
# its own module (bench/proxy/caddy, cached as bench/proxy/caddy/caddy,
# ignored by git); it needs the Go module proxy the first time. Each proxy
# runs pinned to PROXY_CPU (one core, one thread/worker/GOMAXPROCS=1), the
# backend and the driver to DRIVER_CPU. ADAPTIVE overrides the adaptive
# variant's limit flags. PART selects "overload", "tput", "tail" or "all"
# (tail and goals are not in all; see above for cliff, refusal and
# goals). WORKERS sets the driver's connections (default 1024; the cliff
# part takes WORKERS_LIST, default "2000 6000"). sluice-fast and
# sluice-net are sluice's default (no queue) on each HTTP/1.1 engine
# (--engine fast, --engine net); sluice-base is sluice-fast built from
# another commit (BASELINE names its binary: a before/after comparison in
# the same interleaved rounds). WARMUP=0 judges each cell on its only window,
# start included (default 1: a warm-up window first). Prints
# one line per (proxy, load) and writes the reports to $OUT (default: a
# temporary folder, printed).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PART=${PART:-all}
case $PART in
goals | cliff | refusal)
	PROXIES=${PROXIES:-"sluice-fast sluice-net bare-gate nginx"}
	MULTS=${MULTS:-"30 50"}
	ROUNDS=${ROUNDS:-3}
	;;
esac
PROXIES=${PROXIES:-"sluice sluice-noqueue sluice-codel sluice-adaptive bare bare-gate haproxy nginx caddy caddy-maxreq"}
MULTS=${MULTS:-"1 2 5 10"}
DURATION=${DURATION:-5s}
ROUNDS=${ROUNDS:-5}
WORKERS=${WORKERS:-1024}
WORKERS_LIST=${WORKERS_LIST:-"2000 6000"}
# REF is the peer each goal is judged against.
REF=${REF:-nginx}
WARMUP=${WARMUP:-1}
TPUT_DURATION=${TPUT_DURATION:-5s}
# TPUT_CONNS is wrk's connections in the throughput rounds: the goal is
# judged at 32; more (128) is the operating point where the driver's core
# batches its work and the proxies' wake-ups stop dominating.
TPUT_CONNS=${TPUT_CONNS:-32}
# twice the connections: no gate binds, the gate is still on every request
TPUT_LIMIT=${TPUT_LIMIT:-$((2 * TPUT_CONNS))}
# LIMIT is every proxy's concurrency limit toward the backend (its 16
# slots); the throughput rounds raise it to TPUT_LIMIT so that no gate
# binds at 32 connections (the gate is still on every request).
LIMIT=${LIMIT:-16}

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

# Caddy: its own module, so its dependency tree stays out of go.mod and
# bench/go.mod; rebuilt only when the module changed.
CADDY_DIR="$REPO/bench/proxy/caddy"
CADDY="$CADDY_DIR/caddy"
case " $PROXIES " in *" caddy"*)
	if [ ! -x "$CADDY" ] || [ "$CADDY_DIR/go.mod" -nt "$CADDY" ] || [ "$CADDY_DIR/main.go" -nt "$CADDY" ]; then
		echo "building Caddy (first time: a few minutes)" >&2
		(cd "$CADDY_DIR" && go build -o caddy .) || echo "Caddy build failed: caddy skipped" >&2
	fi
	;;
esac

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
			--max-inflight "$LIMIT" --queue 16 --max-wait 50ms --log-level warn &
		;;
	sluice-noqueue)
		# sluice proxy's default: no queue, a full gate refuses at once
		# (what nginx's limit_conn does).
		taskset -c "$PROXY_CPU" env GOMAXPROCS=1 "$OUT/sluice" proxy --upstream "http://127.0.0.1:$BPORT" \
			--addr "127.0.0.1:$PPORT" --admin-addr "127.0.0.1:$APORT" --max-conns 10000 \
			--max-inflight "$LIMIT" --log-level warn &
		;;
	sluice-fast | sluice-net)
		# sluice's default (no queue) on one HTTP/1.1 engine.
		taskset -c "$PROXY_CPU" env GOMAXPROCS=1 "$OUT/sluice" proxy --upstream "http://127.0.0.1:$BPORT" \
			--addr "127.0.0.1:$PPORT" --admin-addr "127.0.0.1:$APORT" --max-conns 15000 \
			--max-inflight "$LIMIT" --engine "${1#sluice-}" --log-level warn &
		;;
	sluice-base)
		# sluice-fast from another build (BASELINE: its sluice binary), for
		# a before/after comparison in the same rounds.
		taskset -c "$PROXY_CPU" env GOMAXPROCS=1 "$BASELINE" proxy --upstream "http://127.0.0.1:$BPORT" \
			--addr "127.0.0.1:$PPORT" --admin-addr "127.0.0.1:$APORT" --max-conns 15000 \
			--max-inflight "$LIMIT" --engine fast --log-level warn &
		;;
	sluice-codel)
		taskset -c "$PROXY_CPU" env GOMAXPROCS=1 "$OUT/sluice" proxy --upstream "http://127.0.0.1:$BPORT" \
			--addr "127.0.0.1:$PPORT" --admin-addr "127.0.0.1:$APORT" --max-conns 10000 \
			--max-inflight "$LIMIT" --queue 16 --max-wait 50ms --queue-discipline codel --log-level warn &
		;;
	sluice-adaptive)
		taskset -c "$PROXY_CPU" env GOMAXPROCS=1 "$OUT/sluice" proxy --upstream "http://127.0.0.1:$BPORT" \
			--addr "127.0.0.1:$PPORT" --admin-addr "127.0.0.1:$APORT" --max-conns 10000 \
			--max-inflight 64 ${ADAPTIVE:---limit gradient2 --limit-min 8 --slo 100ms} --queue 16 --max-wait 50ms --log-level warn &
		;;
	bare)
		taskset -c "$PROXY_CPU" env GOMAXPROCS=1 "$OUT/bare" -addr "127.0.0.1:$PPORT" -upstream "http://127.0.0.1:$BPORT" &
		;;
	bare-gate)
		# the cheapest gate a Go proxy can have: a channel tried without
		# waiting, a bare 503 (the floor of net/http under overload)
		taskset -c "$PROXY_CPU" env GOMAXPROCS=1 "$OUT/bare" -addr "127.0.0.1:$PPORT" -upstream "http://127.0.0.1:$BPORT" -limit "$LIMIT" &
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
	server s1 127.0.0.1:$BPORT maxconn $LIMIT
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
	upstream be { server 127.0.0.1:$BPORT; keepalive $((LIMIT > 64 ? LIMIT : 64)); }
	server {
		listen 127.0.0.1:$PPORT;
		server_name bench;
		location / {
			limit_conn upstream $LIMIT;
			proxy_pass http://be;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
		}
	}
}
CFG
		taskset -c "$PROXY_CPU" nginx -c "$OUT/nginx.conf" &
		;;
	caddy | caddy-maxreq)
		# caddy: max_conns_per_host on the transport, as the issue names
		# it. Go's transport makes a request beyond the limit wait for a
		# connection, without bound and without a timeout: no refusals.
		# caddy-maxreq: the upstream's max_requests, with lb_try_duration
		# 50ms polled every 5 ms: a request finding the upstream full
		# retries selection for 50 ms, then gets a 503 (no Retry-After).
		local up='{"dial": "127.0.0.1:'$BPORT'"}' lb='{}'
		if [ "$1" = caddy-maxreq ]; then
			up='{"dial": "127.0.0.1:'$BPORT'", "max_requests": '$LIMIT'}'
			lb='{"try_duration": "50ms", "try_interval": "5ms"}'
		fi
		mkdir -p "$OUT/caddy"
		cat >"$OUT/caddy.json" <<CFG
{
  "admin": {"disabled": true, "config": {"persist": false}},
  "logging": {"logs": {"default": {"level": "PANIC", "writer": {"output": "discard"}}}},
  "apps": {"http": {"servers": {"bench": {
    "listen": ["127.0.0.1:$PPORT"],
    "automatic_https": {"disable": true},
    "routes": [{"handle": [{
      "handler": "reverse_proxy",
      "upstreams": [$up],
      "load_balancing": $lb,
      "transport": {"protocol": "http", "max_conns_per_host": $LIMIT,
                    "keep_alive": {"max_idle_conns_per_host": 64}}
    }]}]
  }}}}
}
CFG
		taskset -c "$PROXY_CPU" env GOMAXPROCS=1 XDG_CONFIG_HOME="$OUT/caddy" XDG_DATA_HOME="$OUT/caddy" \
			"$CADDY" run --config "$OUT/caddy.json" >"$OUT/caddy/$1.log" 2>&1 &
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

# have PROXY: whether the proxy (or tool) can run here.
have() {
	case $1 in
	caddy*) [ -x "$CADDY" ] ;;
	*) command -v "$1" >/dev/null ;;
	esac
}
# peer PROXY: true when PROXY is an outside program that may be missing.
peer() { case $1 in haproxy | nginx | caddy*) return 0 ;; esac; return 1; }

stop_all() { cleanup; sleep 0.3; }

if [ -n "${ONLY_FUNCS:-}" ]; then return 0; fi # sourced by recovery.sh
echo "reports in $OUT"
: >"$OUT/goals.tsv"
# overload_cell PROXY MULT: one open-loop cell; prints its line and
# appends "proxy mult goodput p99" to $OUT/cells.tsv. With WARMUP=1 the
# driver runs two windows of DURATION on the same connections and the cell
# is judged on the second: the first holds the start (1,024 connections
# opened at once), which is not what a proxy under overload spends its
# time doing and whose cost moves the p99 of a 5 s window by 5-10 ms.
overload_cell() {
	local px=$1 m=$2 try rc rate t0 t1 windows=1
	[ "$WARMUP" = 1 ] && windows=2
	# A cell whose driver fell behind its schedule on the shared core
	# (not because every worker waits on a stuck proxy: dropped = 0)
	# is run once more; if it is still behind, it is marked.
	for try in 1 2; do
		start_backend 20ms
		start_proxy "$px"
		rate=$((CAPACITY * m))
		metrics=()
		case $px in sluice*) metrics=(--metrics "http://127.0.0.1:$APORT/metrics") ;; esac
		t0=$(cpu_ticks "$PROXY_PID")
		taskset -c "$DRIVER_CPU" "$OUT/sluice" load --url "http://127.0.0.1:$PPORT/" --rate "$rate" --duration "$DURATION" \
			--windows "$windows" --timeout 2s --workers "$WORKERS" --p99-budget 2s --live off "${metrics[@]}" \
			--out "$OUT/$px-$m-$WORKERS.json" >"$OUT/$px-$m-$WORKERS.txt" 2>&1 || true
		t1=$(cpu_ticks "$PROXY_PID")
		stop_all
		rc=0
		python3 - "$OUT/$px-$m-$WORKERS.json" "$px" "$m" "$((t1 - t0))" "$(getconf CLK_TCK)" "$try" "$OUT/cells.tsv" "$WORKERS" <<'PY' || rc=$?
import json, sys
path, px, m, ticks, hz, last, cells, workers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6] == "2", sys.argv[7], sys.argv[8]
ws = json.load(open(path))["steps"][0]["windows"]
w = ws[-1] # the judged window (after the warm-up one, if any)
c, el = w["counts"], w["elapsed_s"]
behind = w["driver"]["limited"] and c["dropped"] == 0
if behind and not last:
    sys.exit(3)
# the proxy's CPU covers every window
answered = sum(x["counts"]["ok"] + x["counts"]["refused"] + x["counts"]["http_error"] for x in ws)
p99 = w["latency"]["ok_response_time"].get("p99_ms", 0)
cpu_us = ticks / hz * 1e6 / max(answered, 1)
print(f'{px:<16} {m+"x":>5} {workers:>7} {c["sent"]/el:8.0f} {c["ok"]/el:9.0f} {c["refused"]/max(c["sent"],1):9.1%} {p99:10.1f} {cpu_us:12.0f} {c["dropped"]:8d}'
      + (f'  (timeouts/errors {c["transport_error"]+c["http_error"]})' if c["transport_error"]+c["http_error"] else '')
      + (f'  (driver behind schedule: lag p99 {w["driver"]["schedule_lag"]["p99_ms"]:.0f} ms)' if behind else ''))
with open(cells, "a") as f:
    f.write(f'{px}\t{m}\t{c["ok"]/el:.1f}\t{p99:.3f}\t{cpu_us:.2f}\t{workers}\t{int(behind)}\n')
PY
		[ "$rc" = 3 ] || break
	done
}

header() {
	printf '%-16s %5s %7s %8s %9s %9s %10s %12s %8s\n' proxy load conns offered goodput refused p99_ok_ms cpu_us/resp dropped
}

if [ "$PART" = overload ] || [ "$PART" = all ]; then
echo "== overload: backend 16 slots x 20 ms (capacity $CAPACITY/s), open loop, $DURATION per load$([ "$WARMUP" = 1 ] && echo " after a $DURATION warm-up")"
header
for px in $PROXIES; do
	if peer "$px" && ! have "$px"; then echo "skip $px (not installed)"; continue; fi
	for m in $MULTS; do overload_cell "$px" "$m"; done
done
fi # PART overload

if [ "$PART" = tail ]; then
# Interleaved rounds (the order rotates each round) of the proxies at each
# load, then per proxy and load the medians, and per round the ratio of
# each proxy's admitted p99 to the first proxy's.
echo "== tail: $ROUNDS interleaved rounds, $DURATION per cell$([ "$WARMUP" = 1 ] && echo " after a $DURATION warm-up"), loads ${MULTS// /x }x"
: >"$OUT/cells.tsv"
TAIL=()
for px in $PROXIES; do
	if peer "$px" && ! have "$px"; then echo "skip $px (not installed)"; continue; fi
	TAIL+=("$px")
done
header
for r in $(seq "$ROUNDS"); do
	n=${#TAIL[@]}
	for i in $(seq 0 $((n - 1))); do
		px=${TAIL[$(((i + r) % n))]}
		for m in $MULTS; do overload_cell "$px" "$m"; done
	done
done
python3 - "$OUT/cells.tsv" "${TAIL[@]}" <<'PY'
import statistics, sys
from collections import defaultdict
cells, pxs = sys.argv[1], sys.argv[2:]
runs = defaultdict(list) # (proxy, mult) -> [(goodput, p99)] in round order
for line in open(cells):
    px, m, ok, p99 = line.split("\t")[:4]
    runs[(px, m)].append((float(ok), float(p99)))
mults = sorted({m for _, m in runs}, key=int)
print(f"{'proxy':<16} {'load':>5} {'median goodput':>14} {'median p99_ok_ms':>16}  rounds (p99)")
for px in pxs:
    for m in mults:
        v = runs[(px, m)]
        if v:
            print(f"{px:<16} {m+'x':>5} {statistics.median(x[0] for x in v):14.0f} {statistics.median(x[1] for x in v):16.1f}  "
                  + " ".join(f"{x[1]:.1f}" for x in v))
ref = pxs[0]
print(f"per-round ratio to {ref} (median, rounds): goodput, p99")
for px in pxs[1:]:
    for m in mults:
        pairs = list(zip(runs[(px, m)], runs[(ref, m)]))
        if not pairs:
            continue
        g = [a[0] / b[0] for a, b in pairs]
        q = [a[1] / b[1] for a, b in pairs]
        print(f"{px:<16} {m+'x':>5} goodput {statistics.median(g):.3f} ({' '.join(f'{x:.3f}' for x in g)})"
              f"  p99 {statistics.median(q):.2f} ({' '.join(f'{x:.2f}' for x in q)})")
PY
exit 0
fi # PART tail

# present PROXY...: the proxies of the list that can run here.
present() {
	local px
	for px in "$@"; do
		if peer "$px" && ! have "$px"; then echo "skip $px (not installed)" >&2; continue; fi
		if [ "$px" = sluice-base ] && [ ! -x "${BASELINE:-}" ]; then echo "skip sluice-base (BASELINE names no binary)" >&2; continue; fi
		echo "$px"
	done
}

if [ "$PART" = cliff ] || [ "$PART" = goals ]; then
# The receive-livelock cells: offered load far past the backend's (30x,
# 50x) from thousands of client connections, where the proxy's own core
# is what runs out. Interleaved rounds, the proxies' order rotating; each
# cell judged on its second window.
mapfile -t CLIFF < <(present $PROXIES)
echo "== cliff: loads ${MULTS// /x, }x, client connections ${WORKERS_LIST// /, }, $ROUNDS interleaved rounds, $DURATION per window after a warm-up window"
: >"$OUT/cells.tsv"
header
for r in $(seq "$ROUNDS"); do
	n=${#CLIFF[@]}
	echo "round $r: load average $(cut -d' ' -f1-3 /proc/loadavg)"
	for i in $(seq 0 $((n - 1))); do
		px=${CLIFF[$(((i + r) % n))]}
		for m in $MULTS; do
			for WORKERS in $WORKERS_LIST; do overload_cell "$px" "$m"; done
		done
	done
done
cp "$OUT/cells.tsv" "$OUT/cliff.tsv"
python3 - "$OUT/cliff.tsv" "$REF" "$OUT/goals.tsv" "${CLIFF[@]}" <<'PY'
import statistics, sys
from collections import defaultdict
cells, ref, goals, pxs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
runs = defaultdict(list)  # (proxy, mult, workers) -> [(goodput, p99, cpu, behind)] in round order
for line in open(cells):
    px, m, ok, p99, cpu, w, behind = line.rstrip("\n").split("\t")
    runs[(px, m, w)].append((float(ok), float(p99), float(cpu), behind == "1"))
keys = sorted({(m, w) for _, m, w in runs}, key=lambda k: (int(k[0]), int(k[1])))
med = statistics.median
print(f"{'proxy':<14} {'load':>5} {'conns':>6} {'goodput':>8} {'p99_ok_ms':>10} {'cpu_us/answer':>13}  rounds goodput/p99 (* driver behind)")
for px in pxs:
    for m, w in keys:
        v = runs[(px, m, w)]
        if v:
            print(f"{px:<14} {m+'x':>5} {w:>6} {med(x[0] for x in v):8.0f} {med(x[1] for x in v):10.1f} {med(x[2] for x in v):13.1f}  "
                  + " ".join(f"{x[0]:.0f}/{x[1]:.0f}{'*' if x[3] else ''}" for x in v))
if ref not in pxs:
    sys.exit(0)
print(f"per-round ratios to {ref} (median, then each round): goodput (goal >= 1), ok-p99 (goal <= 1.5)")
with open(goals, "a") as g:
    for px in pxs:
        if px == ref:
            continue
        for m, w in keys:
            pairs = [(a, b) for a, b in zip(runs[(px, m, w)], runs[(ref, m, w)]) if b[0] > 0 and b[1] > 0]
            if not pairs:
                continue
            gr = [a[0] / b[0] for a, b in pairs]
            pr = [a[1] / b[1] for a, b in pairs]
            print(f"{px:<14} {m+'x':>5} {w:>6} goodput {med(gr):.3f} ({' '.join(f'{x:.2f}' for x in gr)})  p99 {med(pr):.2f} ({' '.join(f'{x:.2f}' for x in pr)})")
            g.write(f"cliff\t{px}\t{m}x {w} conns goodput / {ref}\t{med(gr):.3f}\t>=\t1.0\n")
            g.write(f"cliff\t{px}\t{m}x {w} conns ok-p99 / {ref}\t{med(pr):.3f}\t<=\t1.5\n")
PY
fi # PART cliff

if [ "$PART" = refusal ] || [ "$PART" = goals ]; then
have wrk || { echo "skip the refusal rounds: wrk not installed"; exit 1; }
# CPU per refusal with the gate full: one slot (LIMIT=1), held by a
# request the backend keeps for two minutes; wrk's keep-alive requests
# are all refused. The proxy's CPU from /proc over wrk's answers.
REFUSAL_DURATION=${REFUSAL_DURATION:-5s}
REFUSAL_CONNS=${REFUSAL_CONNS:-256}
mapfile -t REFP < <(present $PROXIES)
echo "== refusal: gate full (1 slot held), wrk -t1 -c$REFUSAL_CONNS for $REFUSAL_DURATION, $ROUNDS interleaved rounds"
: >"$OUT/refusal.tsv"
SAVED_LIMIT=$LIMIT
LIMIT=1
for r in $(seq "$ROUNDS"); do
	n=${#REFP[@]}
	for i in $(seq 0 $((n - 1))); do
		px=${REFP[$(((i + r) % n))]}
		start_backend 120s
		start_proxy "$px"
		curl -s -o /dev/null --max-time 130 "http://127.0.0.1:$PPORT/held" &
		HOLDER=$!
		PIDS+=("$HOLDER")
		sleep 0.3
		taskset -c "$DRIVER_CPU" wrk -t1 -c"$REFUSAL_CONNS" -d1s "http://127.0.0.1:$PPORT/" >/dev/null 2>&1 || true
		t0=$(cpu_ticks "$PROXY_PID")
		taskset -c "$DRIVER_CPU" wrk -t1 -c"$REFUSAL_CONNS" -d"$REFUSAL_DURATION" "http://127.0.0.1:$PPORT/" >"$OUT/refusal-$px-$r.txt" 2>&1 || true
		t1=$(cpu_ticks "$PROXY_PID")
		stop_all
		python3 - "$OUT/refusal-$px-$r.txt" "$px" "$r" "$((t1 - t0))" "$(getconf CLK_TCK)" "$OUT/refusal.tsv" <<'PY'
import re, sys
path, px, r, ticks, hz, out = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
t = open(path).read()
m = re.search(r"(\d+) requests in ([\d.]+)(m?s)", t)
n = int(m.group(1)) if m else 0
bad = re.search(r"Non-2xx or 3xx responses: (\d+)", t)
refused = int(bad.group(1)) if bad else 0
cpu = ticks / hz * 1e6 / max(n, 1)
print(f"round {r} {px:<14} answers {n:8d} refused {refused / max(n, 1):6.1%} cpu_us/answer {cpu:6.2f}")
open(out, "a").write(f"{px}\t{r}\t{cpu:.3f}\t{refused / max(n, 1):.4f}\n")
PY
	done
done
LIMIT=$SAVED_LIMIT
python3 - "$OUT/refusal.tsv" "$REF" "$OUT/goals.tsv" "${REFP[@]}" <<'PY'
import statistics, sys
from collections import defaultdict
path, ref, goals, pxs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
runs = defaultdict(list)
for line in open(path):
    px, r, cpu, share = line.split("\t")
    runs[px].append((float(cpu), float(share)))
for px in pxs:
    if runs[px]:
        print(f"{px:<14} median cpu_us/refusal {statistics.median(x[0] for x in runs[px]):6.2f}  refused {min(x[1] for x in runs[px]):.1%}+  rounds "
              + " ".join(f"{x[0]:.2f}" for x in runs[px]))
if ref in pxs:
    with open(goals, "a") as g:
        for px in pxs:
            if px == ref:
                continue
            rs = [a[0] / b[0] for a, b in zip(runs[px], runs[ref]) if b[0] > 0]
            if rs:
                print(f"{px:<14} / {ref} CPU per refusal = {statistics.median(rs):.2f} (goal <= 1.25)  rounds " + " ".join(f"{x:.2f}" for x in rs))
                g.write(f"refusal\t{px}\tCPU per refusal / {ref}\t{statistics.median(rs):.3f}\t<=\t1.25\n")
PY
fi # PART refusal

case $PART in overload | cliff | refusal) exit 0 ;; esac
have wrk || { echo "skip the throughput rounds: wrk not installed"; exit 0; }
echo "== no overload: trivial backend, wrk -t1 -c$TPUT_CONNS for $TPUT_DURATION, $ROUNDS interleaved rounds (order rotates), limits $TPUT_LIMIT"
LIMIT=$TPUT_LIMIT
TPUT=()
for px in $PROXIES; do
	if [ "$PART" != goals ]; then
		case $px in sluice-noqueue | sluice-codel | sluice-adaptive | caddy-maxreq | bare-gate) continue ;; esac # the same engine as sluice / caddy / bare
	fi
	if peer "$px" && ! have "$px"; then continue; fi
	TPUT+=("$px")
done
for r in $(seq "$ROUNDS"); do
	n=${#TPUT[@]}
	order=()
	for i in $(seq 0 $((n - 1))); do order+=("${TPUT[$(((i + r) % n))]}"); done
	echo "round $r: load average $(cut -d' ' -f1-3 /proc/loadavg), order ${order[*]}"
	for px in "${order[@]}"; do
		start_backend 0
		start_proxy "$px"
		# warm up (connections, the JIT-less but cache-cold first requests)
		taskset -c "$DRIVER_CPU" wrk -t1 -c"$TPUT_CONNS" -d1s "http://127.0.0.1:$PPORT/" >/dev/null 2>&1 || true
		t0=$(cpu_ticks "$PROXY_PID")
		taskset -c "$DRIVER_CPU" wrk -t1 -c"$TPUT_CONNS" -d"$TPUT_DURATION" "http://127.0.0.1:$PPORT/" >"$OUT/tput-$px-$r.txt" 2>&1 || true
		t1=$(cpu_ticks "$PROXY_PID")
		echo "cpu_ticks $((t1 - t0)) $(getconf CLK_TCK)" >>"$OUT/tput-$px-$r.txt"
		stop_all
	done
done
python3 - "$OUT" "$ROUNDS" "$REF" "$TPUT_CONNS" "${TPUT[@]}" <<'PY'
import re, sys, statistics
out, rounds, ref, conns, pxs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
def parse(px, r):
    t = open(f"{out}/tput-{px}-{r}.txt").read()
    m = re.search(r"(\d+) requests in ([\d.]+)(m?s)", t)
    if not m:
        return None
    n, d = int(m.group(1)), float(m.group(2)) / (1000 if m.group(3) == "ms" else 1)
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", t)
    bad = int(bad.group(1)) if bad else 0
    errs = re.search(r"Socket errors: .*", t)
    c = re.search(r"cpu_ticks (\d+) (\d+)", t)
    cpu = int(c.group(1)) / int(c.group(2)) * 1e6 / max(n, 1) if c else float("nan")
    return (n - bad) / d, bad, cpu, errs.group(0) if errs else ""
res = {px: [parse(px, r) for r in range(1, rounds + 1)] for px in pxs}
print(f"{'proxy':<10} {'median ok/s':>11} {'cpu_us/resp':>11}  rounds (ok/s)")
for px in pxs:
    v = [x for x in res[px] if x]
    if not v:
        continue
    print(f"{px:<10} {statistics.median(x[0] for x in v):11.0f} {statistics.median(x[2] for x in v):11.1f}  "
          + " ".join(f"{x[0]:.0f}" for x in v)
          + "".join(f"  [non-2xx {x[1]}]" for x in v if x[1]) + "".join(f"  [{x[3]}]" for x in v if x[3]))
if "bare" in res:
    print("per-round ratio to bare (median):")
    for px in pxs:
        if px == "bare":
            continue
        rs = [a[0] / b[0] for a, b in zip(res[px], res["bare"]) if a and b and b[0]]
        if rs:
            print(f"{px:<10} / bare = {statistics.median(rs):.2f}  rounds " + " ".join(f"{x:.2f}" for x in rs))
    # The proxy's own CPU per response moves far less with the machine's
    # load than throughput does: bare's CPU / this proxy's is the
    # throughput ratio the two would have on a core of their own.
    print("per-round CPU ratio, bare's CPU per response / this proxy's (median):")
    for px in pxs:
        if px == "bare":
            continue
        rs = [b[2] / a[2] for a, b in zip(res[px], res["bare"]) if a and b and a[2]]
        if rs:
            print(f"{px:<10} bare/this = {statistics.median(rs):.2f}  rounds " + " ".join(f"{x:.2f}" for x in rs))
if "sluice" in res and "caddy" in res:
    rs = [a[0] / b[0] for a, b in zip(res["sluice"], res["caddy"]) if a and b and b[0]]
    print(f"sluice / caddy = {statistics.median(rs):.2f}  rounds " + " ".join(f"{x:.2f}" for x in rs))
if ref in res:
    print(f"per-round CPU per response, this proxy's / {ref}'s (median; goal <= 1.5 for sluice at wrk -c32; this run -c{conns}):")
    with open(f"{out}/goals.tsv", "a") as g:
        for px in pxs:
            if px == ref:
                continue
            rs = [a[2] / b[2] for a, b in zip(res[px], res[ref]) if a and b and b[2]]
            if rs:
                print(f"{px:<10} this/{ref} = {statistics.median(rs):.2f}  rounds " + " ".join(f"{x:.2f}" for x in rs))
                g.write(f"tput\t{px}\tCPU per proxied response / {ref} (wrk -c{conns})\t{statistics.median(rs):.3f}\t<=\t1.5\n")
PY

if [ "$PART" = goals ]; then
echo "== goals (sluice's engines against $REF; medians of per-round ratios)"
python3 - "$OUT/goals.tsv" <<'PY'
import sys
for line in open(sys.argv[1]):
    part, px, what, v, op, goal = line.rstrip("\n").split("\t")
    if not px.startswith("sluice"):
        continue
    ok = float(v) >= float(goal) if op == ">=" else float(v) <= float(goal)
    print(f"{'met ' if ok else 'MISS'} {px:<12} {what:<42} {float(v):6.3f} (goal {op} {goal})")
PY
fi
