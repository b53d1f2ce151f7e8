#!/usr/bin/env bash
# serve-cliff.sh: `sluice serve` beside nginx when cold reads are offered at
# 30x and 50x what the disk can serve, from thousands of client
# connections: the server's own core is what runs out, and what counts is
# how many reads still succeed (goodput) and how long they take (ok-p99).
#
# The disk is bench/static/slowdisk: the site mounted again through FUSE,
# 16 channels x 20 ms per read (800 reads/s), no page cache, so both
# servers read from the same disk of known capacity. Every request is a
# cold read: sluice with --cache-bytes 0 (its disk gate, 16 slots, no
# queue: the defaults), nginx with limit_conn 16 and limit_conn_status 503
# on the location. nginx reads files in its one worker by default, so a
# 20 ms read stops every connection for 20 ms (nginx: about 50 reads/s);
# an operator with slow disks turns on `aio threads`, and nginx-aio is
# that, with sendfile off: nginx's threaded sendfile reads the pages in a
# thread only to bring them into the page cache and then sends from the
# worker, and a direct-I/O disk keeps nothing there, so the send would
# block the worker again. nginx-aio is the peer the goals are judged
# against. Server pinned to SERVER_CPUS (one core, GOMAXPROCS=1,
# one worker), the driver and the disk to DRIVER_CPU. Each cell runs a
# warm-up window and is judged on the second.
#
#   bench/scripts/serve-cliff.sh          # as root (the mount); about 12 minutes
#   SERVERS="sluice-fast nginx-aio" MULTS="30 50" WORKERS_LIST="2000 6000" ROUNDS=3 DURATION=5s bench/scripts/serve-cliff.sh
#   MULTS="5 10" WORKERS_LIST=1024 bench/scripts/serve-cliff.sh   # milder overload
#
# sluice-base is sluice-fast built from another commit (BASELINE names its
# binary), for a before/after comparison in the same rounds.
#
# Prints one line per cell, then per server the medians and the per-round
# ratios to REF (default nginx-aio): goodput (goal >= 1) and ok-p99
# (goal <= 1.5).
set -euo pipefail
SERVER_CPUS=${SERVER_CPUS:-0}
DRIVER_CPU=${DRIVER_CPU:-1}
source "$(dirname "$0")/static-common.sh"
SERVERS=${SERVERS:-"sluice-fast sluice-net nginx-aio"}
MULTS=${MULTS:-"30 50"}
WORKERS_LIST=${WORKERS_LIST:-"2000 6000"}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
REF=${REF:-nginx-aio}
SERVICE=${SERVICE:-20ms}
CHANNELS=${CHANNELS:-16}
LIMIT=${LIMIT:-16}
case $SERVICE in [0-9]*ms) ;; *) echo "SERVICE must be a positive number of ms (e.g. 20ms)" >&2; exit 2 ;; esac
CAPACITY=$(awk -v c="$CHANNELS" -v s="${SERVICE%ms}" 'BEGIN {printf "%d", (s > 0 ? c * 1000 / s : 0)}')
[ "$CAPACITY" -gt 0 ] || { echo "CHANNELS and SERVICE must give a capacity above 0 reads/s" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "serve-cliff.sh mounts a FUSE disk: run it as root" >&2; exit 2; }
need python3; need nginx
case " $SERVERS " in *" sluice-base "*)
	[ -x "${BASELINE:-}" ] || { echo "SERVERS has sluice-base: BASELINE must name a sluice binary" >&2; exit 2; } ;;
esac
DISK_PID=
MNT=$WORK/disk

unmount_disk() {
	if [ -n "$DISK_PID" ]; then
		kill "$DISK_PID" 2>/dev/null || true
		wait "$DISK_PID" 2>/dev/null || true
		DISK_PID=
	fi
	if mountpoint -q "$MNT" 2>/dev/null; then umount -l "$MNT" || true; fi
}
# the mount goes first: cleanup removes $WORK, which must not reach
# through the mount into the site
trap 'stop_server; unmount_disk; cleanup' EXIT INT TERM

build_servers
(cd "$REPO/bench" && go build -o "$WORK/slowdisk" ./static/slowdisk)
make_site
mkdir -p "$MNT"
taskset -c "$DRIVER_CPU" "$WORK/slowdisk" -src "$SITE" -mnt "$MNT" -service "$SERVICE" -channels "$CHANNELS" >"$WORK/disk.log" 2>&1 &
DISK_PID=$!
for _ in $(seq 100); do mountpoint -q "$MNT" && break; sleep 0.05; done
mountpoint -q "$MNT" || { echo "the slow disk did not mount:" >&2; cat "$WORK/disk.log" >&2; exit 1; }
SITE_FILES=$SITE # check_200 compares sizes with the files themselves
SITE=$MNT        # every server serves the mount

# start_one NAME: starts the server, pinned, and waits for it.
start_one() {
	case $1 in
	sluice-fast | sluice-net | sluice-base)
		local bin=$WORK/sluice engine=${1#sluice-}
		[ "$1" = sluice-base ] && bin=$BASELINE engine=fast
		taskset -c "$SERVER_CPUS" env GOMAXPROCS=1 "$bin" serve --addr "127.0.0.1:$PORT" --admin-addr "127.0.0.1:$ADMIN_PORT" \
			--root "$MNT" --cache-bytes 0 --max-inflight "$LIMIT" --max-conns 15000 --engine "$engine" --log-level warn \
			>"$WORK/server.log" 2>&1 &
		SERVER_PID=$!
		;;
	nginx | nginx-aio)
		local dir=$WORK/$1 aio="sendfile on;"
		[ "$1" = nginx-aio ] && aio="aio threads; sendfile off;"
		mkdir -p "$dir/tmp"
		cat >"$dir/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log error;
events { worker_connections 20000; }
http {
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    access_log off;
    $aio
    tcp_nopush on;
    keepalive_timeout 65s;
    keepalive_requests 100000000;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    limit_conn_zone \$server_name zone=disk:1m;
    limit_conn_status 503;
    server {
        listen 127.0.0.1:$PORT;
        server_name bench;
        root $MNT;
        location / { limit_conn disk $LIMIT; }
    }
}
CONF
		taskset -c "$SERVER_CPUS" nginx -p "$dir" -c "$dir/nginx.conf" >"$WORK/server.log" 2>&1 &
		SERVER_PID=$!
		;;
	*) echo "unknown server $1" >&2; exit 2 ;;
	esac
	wait_ready
}

# the servers answer the page in full from the slow disk
for s in $SERVERS; do
	start_one "$s"
	got=$(curl -s -o /dev/null -w '%{http_code} %{size_download}' "http://127.0.0.1:$PORT/page.html")
	want="200 $(stat -c %s "$SITE_FILES/page.html")"
	[ "$got" = "$want" ] || { echo "$s: GET /page.html: got '$got', want '$want'" >&2; exit 1; }
	stop_server
done

machine_line
echo "disk: $CHANNELS channels x $SERVICE ($CAPACITY reads/s); every GET /page.html a cold read; gates $LIMIT; loads ${MULTS// /x, }x; connections ${WORKERS_LIST// /, }; $ROUNDS interleaved rounds; $DURATION per window after a warm-up window"
CELLS=$WORK/cells.tsv
: >"$CELLS"
printf '%-12s %5s %6s %8s %8s %8s %10s %12s %8s\n' server load conns offered goodput refused p99_ok_ms cpu_us/answer dropped

# cell SERVER MULT WORKERS: one open-loop cell, judged on its second window.
cell() {
	local s=$1 m=$2 w=$3 t0 t1 out=$WORK/$1-$2-$3
	start_one "$s"
	t0=$(server_cpu_ticks)
	taskset -c "$DRIVER_CPU" "$WORK/sluice" load --url "http://127.0.0.1:$PORT/page.html" --rate $((CAPACITY * m)) \
		--duration "$DURATION" --windows 2 --timeout 2s --workers "$w" --p99-budget 2s --live off \
		--out "$out.json" >"$out.txt" 2>&1 || true
	t1=$(server_cpu_ticks)
	stop_server
	sleep 0.3
	python3 - "$out.json" "$s" "$m" "$w" "$((t1 - t0))" "$(getconf CLK_TCK)" "$CELLS" <<'PY'
import json, sys
path, s, m, w, ticks, hz, cells = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
ws = json.load(open(path))["steps"][0]["windows"]
x = ws[-1]
c, el = x["counts"], x["elapsed_s"]
answered = sum(v["counts"]["ok"] + v["counts"]["refused"] + v["counts"]["http_error"] for v in ws)
p99 = x["latency"]["ok_response_time"].get("p99_ms", 0)
cpu = ticks / hz * 1e6 / max(answered, 1)
behind = x["driver"]["limited"] and c["dropped"] == 0
print(f'{s:<12} {m+"x":>5} {w:>6} {c["sent"]/el:8.0f} {c["ok"]/el:8.0f} {c["refused"]/max(c["sent"],1):8.1%} {p99:10.1f} {cpu:12.1f} {c["dropped"]:8d}'
      + (f'  (timeouts/errors {c["transport_error"]+c["http_error"]})' if c["transport_error"] + c["http_error"] else "")
      + ("  (driver behind schedule)" if behind else ""))
with open(cells, "a") as f:
    f.write(f'{s}\t{m}\t{w}\t{c["ok"]/el:.1f}\t{p99:.3f}\t{cpu:.2f}\n')
PY
}

read -r -a LIST <<<"$SERVERS"
for r in $(seq "$ROUNDS"); do
	echo "round $r: load average $(cut -d' ' -f1-3 /proc/loadavg)"
	n=${#LIST[@]}
	for i in $(seq 0 $((n - 1))); do
		s=${LIST[$(((i + r) % n))]}
		for m in $MULTS; do
			for w in $WORKERS_LIST; do cell "$s" "$m" "$w"; done
		done
	done
done
unmount_disk
cat "$WORK/disk.log"

python3 - "$CELLS" "$REF" "${LIST[@]}" <<'PY'
import statistics, sys
from collections import defaultdict
cells, ref, servers = sys.argv[1], sys.argv[2], sys.argv[3:]
runs = defaultdict(list)  # (server, mult, workers) -> [(goodput, p99, cpu)] in round order
for line in open(cells):
    s, m, w, ok, p99, cpu = line.rstrip("\n").split("\t")
    runs[(s, m, w)].append((float(ok), float(p99), float(cpu)))
keys = sorted({(m, w) for _, m, w in runs}, key=lambda k: (int(k[0]), int(k[1])))
med = statistics.median
print(f"\n{'server':<12} {'load':>5} {'conns':>6} {'goodput':>8} {'p99_ok_ms':>10} {'cpu_us/answer':>13}  rounds goodput/p99")
for s in servers:
    for m, w in keys:
        v = runs[(s, m, w)]
        if v:
            print(f"{s:<12} {m+'x':>5} {w:>6} {med(x[0] for x in v):8.0f} {med(x[1] for x in v):10.1f} {med(x[2] for x in v):13.1f}  "
                  + " ".join(f"{x[0]:.0f}/{x[1]:.0f}" for x in v))
if ref not in servers:
    sys.exit(0)
print(f"per-round ratios to {ref} (median, then each round): goodput (goal >= 1), ok-p99 (goal <= 1.5)")
for s in servers:
    if s == ref:
        continue
    for m, w in keys:
        pairs = [(a, b) for a, b in zip(runs[(s, m, w)], runs[(ref, m, w)]) if b[0] > 0 and b[1] > 0]
        if not pairs:
            continue
        g = [a[0] / b[0] for a, b in pairs]
        p = [a[1] / b[1] for a, b in pairs]
        verdict = "met" if med(g) >= 1 and med(p) <= 1.5 else "missed"
        print(f"{s:<12} {m+'x':>5} {w:>6} goodput {med(g):.3f} ({' '.join(f'{x:.2f}' for x in g)})"
              f"  p99 {med(p):.2f} ({' '.join(f'{x:.2f}' for x in p)})  {verdict}")
PY
