# Shared by cliff.sh and static-vs-nginx.sh (source it; not executable).
# Builds the servers, makes a site directory, starts and stops servers
# pinned to SERVER_CPUS while wrk runs pinned to WRK_CPUS, and parses wrk.

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SERVER_CPUS=${SERVER_CPUS:-0}
WRK_CPUS=${WRK_CPUS:-1}
PORT=${PORT:-18431}
ADMIN_PORT=${ADMIN_PORT:-18432}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/sluice-static-bench.XXXXXX")
chmod 755 "$WORK" # nginx workers run as an unprivileged user and must read the site
SERVER_PID=
BG_PID= # a background load generator, stopped with the server

cleanup() {
	stop_bg
	stop_server
	rm -rf "$WORK"
}

stop_bg() {
	if [ -n "$BG_PID" ]; then
		kill "$BG_PID" 2>/dev/null || true
		wait "$BG_PID" 2>/dev/null || true
		BG_PID=
	fi
}
trap cleanup EXIT INT TERM

need() { command -v "$1" >/dev/null || { echo "missing tool: $1" >&2; exit 2; }; }

# build_servers builds the sluice binary and the benchmark server (the
# FileServer peer, and the fallback used while `sluice serve` is not built).
build_servers() {
	need go; need wrk; need curl; need taskset
	(cd "$REPO" && go build -o "$WORK/sluice" ./cmd/sluice)
	(cd "$REPO/bench" && go build -o "$WORK/benchserver" ./static/server)
	local help
	help=$("$WORK/sluice" serve --help 2>&1 || true)
	if grep -q -- '-gate-scope' <<<"$help"; then
		SLUICE_SERVE=1
	else
		SLUICE_SERVE=0
		echo "note: \`sluice serve\` is not built yet; using bench/static/server (the same static.Handler)" >&2
	fi
}

# make_site writes the files every server serves.
make_site() {
	SITE=$WORK/site
	mkdir -p "$SITE"
	# A ~1 KiB page, like a small site's /index.html.
	{
		echo '<!doctype html><html><head><meta charset="utf-8"><title>sluice bench</title></head><body>'
		for i in $(seq 1 16); do echo "<p>line $i of the benchmark page, served from memory.</p>"; done
		echo '</body></html>'
	} >"$SITE/index.html"
	# The same page under another name: FileServer answers /index.html
	# with a redirect to ./, so comparisons use /page.html.
	cp "$SITE/index.html" "$SITE/page.html"
	# Over the 1 MiB cache limit: always streamed from disk, under a slot.
	head -c $((4 << 20)) /dev/urandom >"$SITE/large.bin"
}

# start_sluice SCOPE WORK_LIMIT [extra flags...]
start_sluice() {
	local scope=$1 limit=$2
	shift 2
	if [ "$SLUICE_SERVE" = 1 ] && [ -z "${SLOW_READ:-}" ]; then
		taskset -c "$SERVER_CPUS" "$WORK/sluice" serve --addr "127.0.0.1:$PORT" --admin-addr "127.0.0.1:$ADMIN_PORT" \
			--root "$SITE" --max-inflight "$limit" --gate-scope "$scope" "$@" >"$WORK/server.log" 2>&1 &
	else
		# The slow-disk hook (SLOW_READ) exists only in the benchmark server.
		taskset -c "$SERVER_CPUS" "$WORK/benchserver" -mode sluice -addr "127.0.0.1:$PORT" \
			-root "$SITE" -work-limit "$limit" -gate-scope "$scope" -slow-read "${SLOW_READ:-0}" >"$WORK/server.log" 2>&1 &
	fi
	SERVER_PID=$!
	wait_ready
}

# start_plain: package static on a plain http.Server (the benchmark
# server), without the frame of `sluice serve` (connection limiter, httpgate
# holder, admin listener): what the frame costs per request.
start_plain() {
	taskset -c "$SERVER_CPUS" "$WORK/benchserver" -mode sluice -addr "127.0.0.1:$PORT" -root "$SITE" >"$WORK/server.log" 2>&1 &
	SERVER_PID=$!
	wait_ready
}

# start_floor: the least a net/http handler can cost (one preloaded file).
start_floor() {
	taskset -c "$SERVER_CPUS" "$WORK/benchserver" -mode floor -floor-file "${1#/}" -addr "127.0.0.1:$PORT" -root "$SITE" >"$WORK/server.log" 2>&1 &
	SERVER_PID=$!
	wait_ready
}

start_fileserver() {
	taskset -c "$SERVER_CPUS" "$WORK/benchserver" -mode fileserver -addr "127.0.0.1:$PORT" -root "$SITE" >"$WORK/server.log" 2>&1 &
	SERVER_PID=$!
	wait_ready
}

# start_nginx runs nginx in the foreground (daemon off) with one worker and
# a generated config: no access log, sendfile, open_file_cache, unlimited
# keep-alive requests (nginx's default of 1000 would add reconnects).
start_nginx() {
	need nginx
	local dir=$WORK/nginx
	mkdir -p "$dir/tmp"
	cat >"$dir/nginx.conf" <<CONF
worker_processes 1;
daemon off;
master_process on;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 4096; }
http {
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    access_log off;
    sendfile on;
    tcp_nopush on;
    open_file_cache max=10000 inactive=60s;
    open_file_cache_valid 1s;
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
        location / { }
    }
}
CONF
	taskset -c "$SERVER_CPUS" nginx -p "$dir" -c "$dir/nginx.conf" >"$WORK/server.log" 2>&1 &
	SERVER_PID=$!
	wait_ready
}

wait_ready() {
	for _ in $(seq 1 100); do
		if curl -fsS -o /dev/null "http://127.0.0.1:$PORT/index.html" 2>/dev/null; then
			return 0
		fi
		if ! kill -0 "$SERVER_PID" 2>/dev/null; then
			echo "server exited:" >&2
			cat "$WORK/server.log" >&2
			exit 1
		fi
		sleep 0.1
	done
	echo "server not ready on port $PORT (pid $SERVER_PID)" >&2
	cat "$WORK/server.log" >&2
	exit 1
}

stop_server() {
	if [ -n "$SERVER_PID" ]; then
		kill "$SERVER_PID" 2>/dev/null || true
		wait "$SERVER_PID" 2>/dev/null || true
		SERVER_PID=
	fi
}

# server_cpu_ticks sums user+system clock ticks of the server process and
# its children (nginx's worker).
server_cpu_ticks() {
	local sum=0 p t
	for p in $SERVER_PID $(pgrep -P "$SERVER_PID" || true); do
		t=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)
		sum=$((sum + t))
	done
	echo "$sum"
}

# check_200 PATH: the server answers 200 with the file's full size (not a
# redirect, which wrk would count as a success).
check_200() {
	local got want
	got=$(curl -s -o /dev/null -w '%{http_code} %{size_download}' "http://127.0.0.1:$PORT$1")
	want="200 $(stat -c %s "$SITE$1")"
	if [ "$got" != "$want" ]; then
		echo "GET $1: got '$got', want '$want'" >&2
		exit 1
	fi
}

# run_wrk CONNS DURATION PATH -> prints "rps non2xx total cpu_us_per_request".
# The server's CPU time per request does not depend on how much CPU other
# processes on the machine take, so it is the steadier figure on a shared
# machine; requests/s is what a client sees.
run_wrk() {
	local conns=$1 dur=$2 path=$3 out before after
	before=$(server_cpu_ticks)
	out=$(taskset -c "$WRK_CPUS" wrk -t1 -c"$conns" -d"$dur" --timeout 5s "http://127.0.0.1:$PORT$path")
	after=$(server_cpu_ticks)
	local rps total non2xx
	rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
	total=$(awk '/requests in/ {print $1}' <<<"$out")
	non2xx=$(awk '/Non-2xx or 3xx responses:/ {print $NF}' <<<"$out")
	echo "$rps ${non2xx:-0} $total $(awk -v t="$((after - before))" -v n="$total" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.2f", n ? t * 1e6 / hz / n : 0}')"
}

# median of the arguments
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

machine_line() {
	echo "machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(go version | awk '{print $3}'), $(wrk --version 2>&1 | head -1 | awk '{print $1, $2}'), $(nginx -v 2>&1 | sed 's/.*: //'); date $(date -u +%Y-%m-%dT%H:%MZ)"
	echo "server pinned to CPU $SERVER_CPUS, wrk (1 thread) pinned to CPU $WRK_CPUS; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
}
