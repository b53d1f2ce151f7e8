package server

import (
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
)

// withPprof returns the admin handler with the Go runtime profiles
// (net/http/pprof) mounted under /debug/pprof/, when on is true and the
// admin listener is local: a loopback TCP address or a Unix socket.
// Anywhere else profiles would hand stacks, command lines and CPU time to
// whoever can reach the port, so they are not mounted and a warning says
// why. The handlers go on the admin mux only; the server never serves
// http.DefaultServeMux, where the pprof package also registers itself.
func (s *Server) withPprof(admin http.Handler, on bool, addr net.Addr) http.Handler {
	if !on {
		return admin
	}
	if !localAddr(addr) {
		s.log(slog.LevelWarn, "pprof not mounted: the admin listener is not on a loopback address",
			slog.String("admin_addr", addr.String()))
		return admin
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/pprof/", pprof.Index) // also serves the named profiles: goroutine, heap, ...
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	mux.Handle("/", admin)
	s.log(slog.LevelInfo, "pprof mounted on the admin listener", slog.String("path", "/debug/pprof/"))
	return mux
}

// localAddr reports whether addr can only be reached from this machine.
func localAddr(addr net.Addr) bool {
	switch a := addr.(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	}
	return false
}
