// Package proxybench measures sluice's proxy beside a bare
// httputil.ReverseProxy (BenchmarkProxy, BenchmarkProxyPaired) and holds
// the programs that run.sh and recovery.sh compare against HAProxy, nginx
// and Caddy: backend (a server of known capacity) and bare (a ten-line
// ReverseProxy, with -limit the cheapest gate a Go proxy can have). Caddy is its own Go module under caddy/, built by the
// scripts on demand, so its dependencies stay out of this module.
package proxybench
