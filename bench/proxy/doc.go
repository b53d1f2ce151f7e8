// Package proxybench measures sluice's proxy beside a bare
// httputil.ReverseProxy (BenchmarkProxy) and holds the programs that
// run.sh compares against HAProxy and nginx: backend (a server of known
// capacity) and bare (a ten-line ReverseProxy).
package proxybench
