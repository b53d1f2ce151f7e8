#!/usr/bin/env bash
# static-vs-nginx.sh measures cache-hit throughput of sluice's static
# handler side by side with nginx (one worker process, generated config)
# and net/http.FileServer, on the same files, in one run. A fourth server,
# "floor", is net/http with a handler that only writes the preloaded file:
# what any net/http server pays per request, whatever its handler does.
# A fifth, "static-plain", is package static on a plain http.Server without
# the frame of `sluice serve`. "sluice" is `sluice serve` on its default
# HTTP/1.1 engine (fast), "sluice-net" the same with --engine net. Each server is
# pinned to SERVER_CPUS (one core, matching nginx's one worker; Go's
# GOMAXPROCS follows the affinity) and wrk to WRK_CPUS. Rounds are
# interleaved (sluice, FileServer, nginx, sluice, ...) and the median of
# each server's rounds is compared.
#
#   bench/scripts/static-vs-nginx.sh
#   ROUNDS=5 DURATION=5s CONNS=64 FILE=/page.html bench/scripts/static-vs-nginx.sh
#
# Targets: sluice >= 2x FileServer and >= 0.9x nginx (requests/s); the
# CPU per request beside nginx's is printed too (the steadier figure on a
# shared machine).
set -euo pipefail
source "$(dirname "$0")/static-common.sh"
DURATION=${DURATION:-5s}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-64}
FILE=${FILE:-/page.html}

build_servers
make_site
machine_line
echo "wrk -t1 -c$CONNS -d$DURATION --timeout 5s http://127.0.0.1:$PORT$FILE, $ROUNDS interleaved rounds, one warm-up GET each"
echo
declare -A RPS CPU
for round in $(seq 1 "$ROUNDS"); do
	for server in sluice sluice-net fileserver nginx floor static-plain; do
		case $server in
		sluice) start_sluice disk 16 ;;
		sluice-net) start_sluice disk 16 --engine net ;;
		fileserver) start_fileserver ;;
		nginx) start_nginx ;;
		floor) start_floor "$FILE" ;;
		static-plain) start_plain ;;
		esac
		check_200 "$FILE"
		read -r rps bad _ cpu < <(run_wrk "$CONNS" "$DURATION" "$FILE")
		if [ "$bad" != 0 ]; then
			echo "$server answered $bad non-2xx responses" >&2
			exit 1
		fi
		RPS[$server]="${RPS[$server]:-} $rps"
		CPU[$server]="${CPU[$server]:-} $cpu"
		stop_server
	done
done
s=$(median ${RPS[sluice]})
f=$(median ${RPS[fileserver]})
n=$(median ${RPS[nginx]})
sc=$(median ${CPU[sluice]})
echo "| server | requests/s (median) | rounds | sluice / this | server CPU µs/request (median) | rounds | this / sluice |"
echo "|---|---:|---|---:|---:|---|---:|"
for server in sluice sluice-net fileserver nginx floor static-plain; do
	m=$(median ${RPS[$server]})
	c=$(median ${CPU[$server]})
	echo "| $server | $(printf '%.0f' "$m") |$(printf ' %.0f' ${RPS[$server]}) | $(awk -v a="$s" -v b="$m" 'BEGIN {printf "%.2fx", a/b}') | $c |${CPU[$server]} | $(awk -v a="$c" -v b="$sc" 'BEGIN {printf "%.2fx", a/b}') |"
done
echo
nc=$(median ${CPU[nginx]})
echo "sluice (engine fast) / nginx: requests/s $(awk -v a="$s" -v b="$n" 'BEGIN {printf "%.2f", a/b}'), CPU per request $(awk -v a="$sc" -v b="$nc" 'BEGIN {printf "%.2f", a/b}')"
echo "sluice-net / nginx: requests/s $(awk -v a="$(median ${RPS[sluice-net]})" -v b="$n" 'BEGIN {printf "%.2f", a/b}'), CPU per request $(awk -v a="$(median ${CPU[sluice-net]})" -v b="$nc" 'BEGIN {printf "%.2f", a/b}')"
status=0
awk -v s="$s" -v f="$f" 'BEGIN {exit !(s >= 2*f)}' || { echo "MISSED TARGET: sluice < 2x FileServer" >&2; status=1; }
awk -v s="$s" -v n="$n" 'BEGIN {exit !(s >= 0.9*n)}' || { echo "MISSED TARGET: sluice < 0.9x nginx" >&2; status=1; }
exit $status
