// Package connlimit keeps a server's connection count below its
// file-descriptor limit: a net.Listener wrapper that admits at most
// MaxConns open connections, tells the others it is busy and closes
// them, and never lets an EMFILE turn the accept loop into a spin. With
// ConfigureServer it also makes every HTTP connection progress or go
// away: header, idle, send and body timeouts, each counted.
//
// # Usage
//
//	l, err := connlimit.Listen(ctx, "tcp", ":8080", connlimit.Config{Logger: logger})
//	if err != nil { ... }
//	srv := &http.Server{Handler: h}
//	l.ConfigureServer(srv) // timeouts, and their counters
//	err = srv.Serve(l)
//
// # File descriptors, not concurrency
//
// MaxConns protects the process's file descriptors. It is not a way to
// bound concurrent work: a connection costs a descriptor and a few KiB,
// while a refused connection is a failed request, turned away before
// anything could tell a cheap request (a cache hit) from an expensive
// one. Bound work with an admission gate (package admit) at the point of
// cost, and set MaxConns well above the connection pools of your clients
// (load tools and proxies keep dozens of keep-alive connections each):
// a limit below the pool refuses requests the gate would have served and
// cuts throughput below the gate's own capacity.
//
// # Why refuse instead of queueing
//
// Every connection costs a file descriptor, and a process that runs out
// of descriptors fails in the worst places: accept(2) returns EMFILE, but
// so do open(2) for the file a request wanted and socket(2) for the
// upstream call it needed. So the limit on connections sits below the
// descriptor limit, with room to spare, and is enforced by the server
// itself, as muduo does (its "limit the
// number of concurrent connections": count connections, shut the ones
// over the limit, and send a short reply first so the client can fail
// over).
//
// The other way to enforce a limit is to stop calling Accept until a slot
// frees, as golang.org/x/net/netutil.LimitListener does. The kernel then
// completes handshakes anyway and parks the connections in the listen
// backlog, where clients wait with no answer until their own timeout,
// their requests age, and when the backlog overflows new SYNs are dropped
// and retried after a second or more. The server looks dead instead of
// busy. This package keeps calling Accept and answers every connection
// over the limit at once: a fast, explicit refusal the client (or its load
// balancer) can act on, and a server that stays responsive to the
// connections it holds.
//
// # What the client sees
//
// A connection over the limit receives Config.BusyReply, by default
// HTTPBusyReply(1):
//
//	HTTP/1.1 503 Service Unavailable
//	Content-Type: application/json
//	Retry-After: 1
//	Connection: close
//	Cache-Control: no-store
//	Content-Length: 59
//
//	{"error":"BUSY","gate":"connections","reason":"max_conns"}
//
// followed by a close: the project's overload contract, for the gate
// named "connections". The refusal is done in a goroutine of its own (at
// most MaxRefusing at once, each bounded by RefuseLinger): it waits up to
// 100 ms for the request to start, because an HTTP client that receives a
// response before sending its request sees garbage rather than a 503
// (Go's http.Transport reports an "unsolicited response"); it writes the
// reply under BusyWriteTimeout; it half-closes (FIN) and discards input
// until the client closes, because closing a socket with unread input
// sends a reset that can destroy the reply before the client reads it.
// When MaxRefusing refusals are already in progress, the reply is written
// at once on the accept path and the connection closed; the client may
// then see a reset, which is still a fast failure. The server never
// parses the request; it only recognises the cleartext HTTP/2 preface (h2c
// with prior knowledge), which gets an HTTP/2 GOAWAY (ENHANCE_YOUR_CALM,
// the same JSON as debug data) instead of HTTP/1.1 bytes it could not
// read. For TLS set BusyReply to a TLS alert (package server does); for
// non-HTTP protocols to an empty slice: the connection is just closed.
//
// # The default limit
//
// With Config.MaxConns zero, New reads the process's soft RLIMIT_NOFILE
// and subtracts Config.Reserve, by default max(64, limit/10), which is
// left for files, upstream sockets, lingering refusals, the listener
// itself and the runtime. Since Go 1.19 the os package raises the soft
// limit to the hard limit during program initialisation (and restores the
// original for child processes), so the value read at New time is the
// raised one, the real ceiling of this process, not the 1024 that
// `ulimit -n` may show in the shell that started it. New reads it, not
// package initialisation, so a program that lowers or raises its limit
// with setrlimit before New gets a matching MaxConns; a change after New
// is not seen.
// An unlimited or huge soft limit is capped at 1<<20 before the
// subtraction: at that scale memory, not the descriptor table, is the
// constraint, and MaxConns should be set explicitly. Descriptors already
// open at New time are not subtracted; they come out of the reserve. If
// the limit is not above the reserve, New returns ErrNoHeadroom.
//
// An explicit MaxConns is checked against the same limit: with its
// lingering refusals (MaxRefusing, scaled down to a quarter of what the
// connections leave over when not set) and 16 descriptors for standard
// streams, listeners, the poller, an admin listener and files being read,
// it must fit, or New returns ErrNoHeadroom naming the largest value
// that does. A limit that cannot be reached is worse than none: the
// flood it was meant to answer ends in EMFILE, with no reply at all.
//
// # Accept errors
//
// A temporary error from the inner Accept (EMFILE, ENFILE, ENOBUFS,
// ENOMEM, ECONNABORTED, or anything reporting Temporary) leaves the
// pending connection in the backlog and would fail again at once, so
// retrying immediately spins a core and starves the goroutines serving
// existing connections. Listener.Accept instead counts the error by kind,
// pauses, and retries: 5 ms, doubling to MaxAcceptBackoff (1 s by
// default, net/http's cap), reset after any successful accept. Close ends
// a pause at once. Existing connections are served by their own
// goroutines throughout. The derived limit is meant to make EMFILE rare;
// the back-off is for when something else used the descriptors. (The
// libev trick of keeping a spare descriptor to close, accept and drop
// races in a multi-threaded program, and the limit makes it unneeded.)
// Any other error ends Accept, as with net.Listener.
//
// # Timeouts: every connection progresses or goes away
//
// The listener cannot tell an idle keep-alive connection from one
// mid-request; the HTTP server can. So the idle and header timeouts are
// http.Server's IdleTimeout and ReadHeaderTimeout, and
// Listener.ConfigureServer sets them from Config (60 s and 10 s by
// default) and installs Listener.ConnState, which counts the connections
// closed by each timeout (Stats.ClosedIdle, Stats.ClosedHeaderTimeout) by
// watching connection states and the deadline errors of reads through
// Conn. The header timeout is the slowloris defence: without one a
// client holds a connection slot forever by sending a header byte at a
// time.
//
// Two more hold once the headers are in, set per request by a handler
// wrapper ConfigureServer installs, with http.ResponseController
// deadlines (so they work on HTTP/2 streams too):
//
//   - SendTimeout (60 s, nginx's send_timeout): a deadline between two
//     successful writes of the response, renewed before each write (a
//     renewal that would move it by less than a hundredth of SendTimeout
//     is skipped, so a small answer costs one timer operation), not a
//     cap on the response. A large file to a slow but live client
//     completes; a client that stops reading is cut off about SendTimeout
//     after its last progress, and the handler's write fails, so it
//     releases whatever it held. io.Copy into the response (sendfile for
//     an *os.File) goes out in 64 KiB steps, each under a renewed
//     deadline. Counted in Stats.ClosedSendTimeout (a write through Conn
//     that missed its deadline; net/http closes the connection).
//   - BodyTimeout (60 s, nginx's client_body_timeout): a deadline between
//     two successful reads of a declared request body, lifted when the
//     body ends. It also bounds net/http's own discard of a body the
//     handler did not read, which has no deadline of its own: without it
//     a request that declares a body and never sends it is never
//     answered. Counted in Stats.ClosedBodyTimeout.
//
// Linux wakes a writer blocked on a full socket only once a third of the
// send buffer has drained, and an autotuned buffer grows to megabytes:
// the grace a slow client really gets is SendTimeout plus the time its
// link needs to drain that much, negligible with the default.
//
// # Counting
//
// Every accepted connection is a *Conn holding one slot; Conn.Close
// releases it exactly once, however many times and from whichever
// goroutines it is called (net/http closes a connection from more than
// one place). Stats returns a snapshot: open and refusing gauges;
// accepted, rejected by reason, busy-reply write errors, idle and
// header-timeout closes, accept errors by kind and back-offs as
// counters. The counters are atomics; the accept path takes no lock
// except to start a lingering refusal. package promsluice exports them to
// Prometheus (sluice_connections_*, sluice_accept_*); package server adds
// the send and body timeout closes.
package connlimit
