// Package server is the frame that sluice's servers (static files, the
// lab, later the reverse proxy) plug into: a main listener that refuses
// connections beyond a limit, a separate admin listener for health,
// metrics and state, and a graceful shutdown that keeps every promise made
// to admitted work.
//
// # Usage
//
//	srv, err := server.Listen(ctx, server.Config{
//		Addr: "127.0.0.1:8080", AdminAddr: "127.0.0.1:9090",
//		Handler: h, Gates: []*admit.Gate{gate},
//		DrainDelay: 5 * time.Second, Logger: logger,
//	})
//	if err != nil { ... }
//	err = srv.Serve(ctx) // until ctx ends (a signal), then a graceful shutdown
//
// # Parts
//
//   - Main listener: Config.Addr (127.0.0.1:8080 by default), wrapped in a
//     connlimit.Listener, so connections beyond MaxConns get a canned 503
//     and are closed rather than left in the backlog. The http.Server gets
//     its ReadHeaderTimeout and IdleTimeout from Config.Conn.
//     Config.Main serves it with another server instead (a *grpc.Server,
//     for sluice ratelimit), stopped with GracefulStop on shutdown.
//   - Admin listener: Config.AdminAddr (127.0.0.1:9090 by default), a
//     different socket with its own small http.Server and no gate, so its
//     answers do not depend on the main listener's load:
//   - GET /livez: 200 {"status":"ok"} while the process serves, draining
//     included: a Kubernetes liveness probe must not restart a pod that
//     is finishing its work.
//   - GET /readyz: 200, or 503 {"status":"draining"} once shutdown has
//     begun (so endpoints drop the pod before its listener closes), or
//     503 {"status":"not_ready","reason":...} while Config.Ready returns
//     an error.
//   - GET /healthz: 200 {"status":"ok"}, or 503 {"status":"draining"}
//     once shutdown has begun, so a balancer stops sending work (kept for
//     the probes written before /livez and /readyz).
//   - GET /metrics: Prometheus text from a registry holding the process
//     and Go runtime collectors (process_cpu_seconds_total and friends),
//     the gates (promsluice.Metrics) and the listener
//     (promsluice.ConnMetrics).
//   - GET /state: JSON, per gate offered, admitted, rejected by reason,
//     completed by outcome, inflight, waiting and capacity; the
//     connection counters; whether the server is draining.
//
// # Shutdown
//
// When the context given to Serve ends, the server:
//
//  1. marks itself draining (/healthz answers 503);
//  2. for Config.DrainDelay keeps serving, with keep-alives off, so a
//     load balancer or a readiness probe sees the 503 and stops sending
//     before the listener closes (a lame duck); then runs the
//     Config.OnShutdown hooks;
//  3. stops accepting (the listener closes) and closes idle keep-alive
//     connections; connections with a request in progress are left alone,
//     and HTTP/1.1 responses written from now on carry Connection: close;
//  4. closes every gate, so requests queued for a slot are refused at once
//     with reason closed (503, Connection: close) instead of waiting out
//     the drain, while admitted work keeps its slot;
//  5. waits up to ShutdownTimeout for admitted work to finish. Until then
//     no connection with a request in progress is reset. If the timeout
//     passes, the remaining connections are closed and Serve reports what
//     was cut short (slots still held per gate, connections still open) in
//     the log and in a *CutShortError;
//  6. closes the connections the handler took over (Config.CloseHijacked:
//     upgrade tunnels), which the drain does not wait for, and says how
//     many it cut instead of reporting a clean shutdown;
//  7. shuts the admin listener down last, so the drain can be watched.
//
// Server.Abort (a second SIGINT or SIGTERM, in sluice serve) ends steps 2
// to 5 at once: every connection is closed, the log says what was cut,
// and Serve returns a *CutShortError with Aborted set.
//
// The main listener's connections are bounded by connlimit, including
// its send and body timeouts (Config.Conn), and the counts of
// connections closed by each are on /metrics
// (sluice_connections_closed_send_timeout_total,
// sluice_connections_closed_body_timeout_total) and /state. net/http's
// own error log (handler panics, TLS handshake errors) goes to
// Config.Logger at level ERROR.
package server
