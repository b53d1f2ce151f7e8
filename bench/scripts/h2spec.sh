#!/usr/bin/env bash
# h2spec.sh runs the h2spec HTTP/2 conformance suite against `sluice serve`
# and against a bare net/http server (bench/h2spec/bare), over TLS and over
# cleartext HTTP/2 (h2c), in the same run, and prints the four counts.
#
#   go install github.com/summerwind/h2spec/cmd/h2spec@latest
#   bench/scripts/h2spec.sh            # from the repository root
#
# Ports 18443/18080 (sluice, TLS/h2c) and 18444/18081 (bare) on 127.0.0.1;
# override with SLUICE_TLS_PORT, SLUICE_H2C_PORT, BARE_TLS_PORT, BARE_H2C_PORT.
# With VERBOSE=1 the failed cases of each run are listed.
set -euo pipefail
cd "$(dirname "$0")/../.."
h2spec=${H2SPEC:-$(command -v h2spec || echo "$(go env GOPATH)/bin/h2spec")}
[ -x "$h2spec" ] || { echo "h2spec not found: go install github.com/summerwind/h2spec/cmd/h2spec@latest" >&2; exit 2; }
command -v openssl >/dev/null || { echo "openssl is needed for a self-signed certificate" >&2; exit 2; }

tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

go build -o "$tmp/sluice" ./cmd/sluice
(cd bench && go build -o "$tmp/bare" ./h2spec/bare)
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=127.0.0.1 \
	-addext subjectAltName=IP:127.0.0.1 -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null

st=${SLUICE_TLS_PORT:-18443} sh=${SLUICE_H2C_PORT:-18080} bt=${BARE_TLS_PORT:-18444} bh=${BARE_H2C_PORT:-18081}
common=(--drain-delay 0 --log-level warn)
"$tmp/sluice" serve --addr 127.0.0.1:$st --admin-addr 127.0.0.1:0 --tls-cert "$tmp/cert.pem" --tls-key "$tmp/key.pem" "${common[@]}" & pids+=($!)
"$tmp/sluice" serve --addr 127.0.0.1:$sh --admin-addr 127.0.0.1:0 --h2c "${common[@]}" & pids+=($!)
"$tmp/bare" --addr 127.0.0.1:$bt --tls-cert "$tmp/cert.pem" --tls-key "$tmp/key.pem" & pids+=($!)
"$tmp/bare" --addr 127.0.0.1:$bh & pids+=($!)
sleep 1

run() { # name port tls-flag...
	local name=$1 port=$2; shift 2
	local out="$tmp/$name.txt"
	"$h2spec" -h 127.0.0.1 -p "$port" -o 2 "$@" >"$out" 2>&1 || true
	printf '%-12s %s\n' "$name" "$(grep -E '^[0-9]+ tests, ' "$out" | tail -1)"
	if [ "${VERBOSE:-}" = 1 ]; then
		grep -E '^ +[×✗]|^  [0-9.]+\. ' "$out" | grep -B1 -E '×|✗' | sed 's/^/    /' || true
	fi
}
run sluice-tls "$st" -t -k
run bare-tls "$bt" -t -k
run sluice-h2c "$sh"
run bare-h2c "$bh"
