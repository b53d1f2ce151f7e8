#!/usr/bin/env bash
# ratelimit.sh: decisions per second and latency of sluice ratelimit
# against the reference Envoy rate limit server (github.com/envoyproxy/ratelimit,
# built from internal/conformance's module), on one redis-server, driven by
# the same gRPC client (bench/ratelimit/rlsload), in interleaved rounds.
#
# Targets, all on the same Redis, each a separate process on loopback TCP:
#   reference     the reference server (fixed window, INCRBY+EXPIRE pipelined per call)
#   sluice-fixed  sluice ratelimit --algorithm fixed_window (one script call per decision)
#   sluice-exact  sluice ratelimit, GCRA, --mode exact (one script call per decision)
#   sluice-lease  sluice ratelimit, GCRA, --mode lease (a round trip per batch of tokens)
#
# The servers run pinned to SERVER_CPUS with GOMAXPROCS=1 (so the figure
# is what one core decides), the client and Redis on CLIENT_CPUS.
# Every round runs each target for DURATION, in a rotating order; the
# script prints each run, the medians, and the ratios the goals are about:
# sluice-lease/reference decisions per second (goal >= 2), and
# sluice-exact/reference p99 (goal <= 1).
#
# Usage: bench/scripts/ratelimit.sh
#        ROUNDS=7 DURATION=10s WORKERS=64 bench/scripts/ratelimit.sh
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-5s}
WORKERS=${WORKERS:-32}
CONNS=${CONNS:-4}
KEYS=${KEYS:-100}
SERVER_CPUS=${SERVER_CPUS:-0}
CLIENT_CPUS=${CLIENT_CPUS:-1}
TARGETS=${TARGETS:-"reference sluice-fixed sluice-exact sluice-lease"}

need() { command -v "$1" >/dev/null || { echo "missing tool: $1" >&2; exit 2; }; }
need go; need redis-server; need redis-cli; need python3; need taskset

WORK=$(mktemp -d "${TMPDIR:-/tmp}/sluice-rls-bench.XXXXXX")
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'; }

echo "building sluice, the reference server and the load client ..." >&2
(cd "$REPO" && go build -o "$WORK/sluice" ./cmd/sluice)
t0=$(date +%s)
(cd "$REPO/internal/conformance" && go build -o "$WORK/reference" github.com/envoyproxy/ratelimit/src/service_cmd)
echo "reference server built in $(( $(date +%s) - t0 ))s" >&2
(cd "$REPO/bench" && go build -o "$WORK/rlsload" ./ratelimit/rlsload)

REDIS_PORT=$(freeport)
taskset -c "$CLIENT_CPUS" redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no >"$WORK/redis.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.05; done

# One rule per algorithm, generous enough that the decisions measured are
# admissions (the common case), 100 distinct users.
mkdir -p "$WORK/rt/config"
cat >"$WORK/rt/config/bench.yaml" <<'YAML'
domain: bench
descriptors:
  - key: user
    rate_limit:
      unit: second
      requests_per_unit: 1000000
YAML
cp "$WORK/rt/config/bench.yaml" "$WORK/bench.yaml"

declare -A ADDR
start_reference() {
	local port; port=$(freeport)
	RUNTIME_ROOT="$WORK" RUNTIME_SUBDIRECTORY=rt RUNTIME_WATCH_ROOT=false RUNTIME_IGNOREDOTFILES=true \
	USE_STATSD=false DISABLE_STATS=true LOG_LEVEL=warn HOST=127.0.0.1 PORT=0 DEBUG_HOST=127.0.0.1 DEBUG_PORT=0 \
	GRPC_HOST=127.0.0.1 GRPC_PORT="$port" BACKEND_TYPE=redis REDIS_SOCKET_TYPE=tcp REDIS_TYPE=single \
	REDIS_URL="127.0.0.1:$REDIS_PORT" REDIS_POOL_SIZE=${REDIS_POOL_SIZE:-10} \
	GOMAXPROCS=1 taskset -c "$SERVER_CPUS" "$WORK/reference" >"$WORK/reference.log" 2>&1 &
	PIDS+=($!)
	ADDR[reference]=127.0.0.1:$port
}
start_sluice() {
	local name=$1; shift
	local port admin; port=$(freeport); admin=$(freeport)
	GOMAXPROCS=1 taskset -c "$SERVER_CPUS" "$WORK/sluice" ratelimit --config "$WORK/bench.yaml" --addr "127.0.0.1:$port" --admin-addr "127.0.0.1:$admin" \
		--redis "redis://127.0.0.1:$REDIS_PORT/0" --redis-prefix "$name:" --log-level warn "$@" >"$WORK/$name.log" 2>&1 &
	PIDS+=($!)
	ADDR[$name]=127.0.0.1:$port
}
start_reference
start_sluice sluice-fixed --algorithm fixed_window
start_sluice sluice-exact --mode exact
start_sluice sluice-lease --mode lease
sleep 1

echo "machine: $(nproc) cores, $(uname -sr); $(date -u +%Y-%m-%dT%H:%MZ); load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "rounds=$ROUNDS duration=$DURATION workers=$WORKERS conns=$CONNS keys=$KEYS server_cpus=$SERVER_CPUS client_cpus=$CLIENT_CPUS" >&2
: >"$WORK/results.jsonl"
read -r -a order <<<"$TARGETS"
for round in $(seq 1 "$ROUNDS"); do
	for i in "${!order[@]}"; do
		t=${order[$(( (i + round) % ${#order[@]} ))]}
		taskset -c "$CLIENT_CPUS" "$WORK/rlsload" -addr "${ADDR[$t]}" -name "$t" -duration "$DURATION" -workers "$WORKERS" \
			-conns "$CONNS" -keys "$KEYS" -domain bench -key user | tee -a "$WORK/results.jsonl"
	done
done

python3 - "$WORK/results.jsonl" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in runs:
    by.setdefault(r["target"], []).append(r)
med = {t: {k: statistics.median(x[k] for x in rs) for k in ("per_second", "p50_us", "p99_us", "p999_us")} for t, rs in by.items()}
print()
print("%-14s %12s %9s %9s %9s   (medians of %d rounds)" % ("target", "decisions/s", "p50 us", "p99 us", "p99.9 us", len(by["reference"])))
for t, m in med.items():
    print("%-14s %12.0f %9.0f %9.0f %9.0f" % (t, m["per_second"], m["p50_us"], m["p99_us"], m["p999_us"]))
ref = med["reference"]
print()
for t in med:
    if t == "reference":
        continue
    print("%-14s throughput x%.2f of the reference, p99 x%.2f" % (t, med[t]["per_second"] / ref["per_second"], med[t]["p99_us"] / ref["p99_us"]))
if "sluice-lease" in med:
    print("goal: sluice-lease throughput >= 2x the reference:", "met" if med["sluice-lease"]["per_second"] >= 2 * ref["per_second"] else "NOT met")
if "sluice-exact" in med:
    print("goal: sluice-exact p99 <= the reference's:", "met" if med["sluice-exact"]["p99_us"] <= ref["p99_us"] else "NOT met")
PY
