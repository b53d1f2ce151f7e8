// Package engine is the HTTP/1.1 server of sluice's servers: a
// connection loop cheaper than net/http's, in front of the same
// handlers and the same shared core. It is the servers' engine, not the
// library's API: the library packages (httpgate and the rest) stay
// net/http, and HTTP/2, h2c and TLS stay on net/http too (package server
// refuses EngineFast with either).
//
// # Why
//
// When the process's own CPU is what is scarce (tens of thousands of
// requests per second at a core), the cost of an answer decides whether
// admitted work finishes: net/http spends about twice nginx's CPU on a
// canned 503, and builds an *http.Request, a header map, a context and a
// background-read goroutine for every request. The engine answers the
// common requests (a cache hit, a refusal) from pre-rendered bytes with
// no allocation, and runs everything else through a net/http bridge, so
// there is one implementation of every rule.
//
// # Parts
//
//   - parseHead, the request parser: strict by construction, so that a
//     request has exactly one reading and no peer in front can read it
//     another way. Lines end with CRLF only; no obsolete line folding;
//     field names are tokens followed directly by the colon; values hold
//     no control byte but HTAB; one Host (HTTP/1.1); the body is framed by
//     one Content-Length of plain digits or by one Transfer-Encoding that
//     is exactly "chunked" (HTTP/1.1 only), never both; targets in the four
//     forms of RFC 9112 as net/http reads them. What it refuses is answered
//     400 (431 for a head over MaxHeaderBytes, 501 for another transfer
//     coding, 505 for another version, 417 for an unknown expectation) with
//     Connection: close, before any handler sees the request, and the
//     connection closes after a bounded linger. FuzzParseHead checks the
//     parser against net/http's: whatever the engine accepts, net/http
//     accepts and reads the same way; the request matrix and smuggling
//     attacks of internal/httpmatrix are diffed against net/http here and,
//     for what an upstream receives, through the proxy.
//   - conn, the connection loop: one goroutine per connection, a 4 KiB
//     read buffer (grown only for a large head), answers gathered in one
//     write buffer and flushed when no pipelined request is waiting, after
//     at most 16 answers, or at 32 KiB; after every 16 answers the
//     goroutine also yields its P (see Receive livelock). Timeouts as connlimit defines them for
//     net/http: ReadHeaderTimeout from the accept (first request) or the
//     first byte (later ones), IdleTimeout between requests, SendTimeout
//     between two writes (renewed on every write; sendfile goes out in
//     64 KiB steps), BodyTimeout between two reads of a body (through
//     connlimit.Conn.SetBodyReadDeadline, so connlimit counts it). A
//     deadline is renewed only when it would move by more than a hundredth
//     of its timeout, so a busy keep-alive connection arms no timer per
//     request. ConnState is called at net/http's points, so connlimit's
//     idle and header-timeout counters work unchanged.
//   - the read loop (loop.go): a connection whose FastHandler is a
//     ReadLoopHandler (the proxy's, serve's) is served inside one
//     syscall.RawConn.Read call, reading its socket itself, so that
//     after a read that emptied the socket it waits without the read
//     that would find nothing: a request answered there costs one read
//     and one write, as nginx's does. Inside the loop the socket (non-
//     blocking, so no call can block) is read and written with raw
//     system calls, as the upstream client's exchange is (see System
//     calls below). What a write leaves goes through the connection's
//     Write, which waits for room under the send timeout. Requests with
//     a body, the bridge
//     (Response.Continue, ContinueWith) and everything the FastHandler
//     passes leave the loop with their head parsed; a FIN that came
//     with the last bytes is caught by a sweeper that looks at busy
//     connections' sockets every 250 ms.
//   - FastHandler, the fast path: asked first for every request without a
//     body (with Config.FastBodies, for every request); it either writes a
//     complete answer (status, pre-rendered header lines, body; the engine
//     adds Date and Connection, and drops a body left unread, or closes
//     the connection when it is over 256 KiB or the client awaits 100
//     Continue), hands the request to a handler of its choosing through
//     the bridge (Response.ServeWith: a decision taken on the fast path,
//     an admission say, carried into the handler and released when it
//     returns), or passes. Request and Response are views into the
//     connection, valid for the call. Refusals renders a gate's refusal
//     once per gate, reason and Retry-After with httpgate.AppendRefusal
//     (the bytes WriteRefusal writes) and keeps it.
//   - Stream, the native answer (native.go): a FastHandler that forwards
//     a request itself (the proxy) streams the answer through
//     Response.Stream, an http.ResponseWriter without an *http.Request
//     whose head rules are the bridge's respWriter itself, with End and
//     Abort (a cut answer closes the connection, as a handler's
//     ErrAbortHandler does). Response.StreamList begins one whose fields
//     are a list (package hfield) sent in its order, under the same head
//     rules (they read the list's framing fields as they read a map's),
//     so a proxy forwards an upstream's fields as they came without a
//     map, a hash per field and a sort. Response.WatchClient starts the bridge's
//     background read only after a delay, from one timer per connection,
//     so an answer that comes quickly costs no read and no goroutine;
//     Unwatch ends it. Inside the read loop, where the connection may
//     not be read, the watch looks at the socket (MSG_PEEK) after the
//     delay and then at doubling intervals up to 250 ms. Request.Fields
//     and Field list the parsed fields.
//   - the net/http bridge (serveHandler): an *http.Request as net/http
//     would build it (Host and Transfer-Encoding moved out of Header, the
//     URL from url.ParseRequestURI), a body reader (Content-Length or
//     chunked, 100 Continue on the first read, trailers checked and
//     dropped), a background read that cancels the request's context when
//     the client goes away (a queued request leaves its gate's queue), and
//     an http.ResponseWriter that follows net/http's head rules
//     (Content-Length for an answer that ends within 2 KiB, else chunked;
//     sniffed Content-Type; Date; no body for HEAD, 1xx, 204, 304;
//     Connection: close when the connection will close), with
//     http.Flusher, io.ReaderFrom (sendfile) and ResponseController's
//     deadlines. Trailers go both ways as in net/http: a request's
//     declared trailers are in Request.Trailer and filled when its body
//     ends (a framing field declared as a trailer is refused, one sent is
//     dropped); a chunked answer carries the values of the names its
//     Trailer field declares and of fields named with http.TrailerPrefix
//     (and an answer that declares trailers is chunked, however short).
//     http.Hijacker hands the connection over for an upgrade, with the
//     bytes already read past the request; the engine then forgets it
//     (ConnState StateHijacked). Panics are logged and close the
//     connection, as in net/http. Not supported: EnableFullDuplex.
//   - Server: Serve, Shutdown (stop accepting, close idle connections,
//     wait for the rest; answers carry Connection: close from then on),
//     Close and SetKeepAlivesEnabled, as http.Server's, so package server
//     drives either engine the same way.
//
// # System calls
//
// A system call made through package syscall tells the runtime that it
// may block (so that another thread can take the P meanwhile), and that
// entry also wakes the runtime's monitor thread (sysmon) whenever it
// found every P idle and went to sleep. A proxy at a modest load goes
// idle between bursts hundreds of times a second, so every burst's
// first call woke the monitor, which then polled every 20 µs for about
// a millisecond before sleeping again: a context switch per few
// responses on the proxy's own core (measured at 32 keep-alive
// connections on one core: 0.09 monitor wake-ups and 0.036 futex calls
// per response, 0.006 and 0.001 with raw calls). The calls of the hot
// path (the loop's reads and writes, the upstream exchange's write,
// reads and its look at an idle connection) are on non-blocking
// sockets and cannot block, so they are raw system calls (package
// internal/rawsock): no entry or exit bookkeeping, no poller lock, no
// monitor woken, and no renewal of the send timeout when the socket
// takes the whole write. Everything that may wait (a write the socket
// did not take whole, the bridge) goes through the net.Conn as before.
// The monitor's other duty, preempting a goroutine that runs for more
// than 10 ms, then waits for its next wake (the next timer, or any
// other system call); the goroutines of the hot path park within
// microseconds, and a stop of the world preempts without it.
//
// # Receive livelock
//
// When the process's own CPU is what runs out, reading and refusing new
// requests competes with finishing admitted ones. What the loop does
// about it:
//
//   - A connection yields its P (runtime.Gosched) after every 16
//     answers. A client that keeps its socket full (a pipeline, of
//     requests refused or not) never blocks on a read, and the Go
//     scheduler would otherwise let it run until it preempts it (after
//     10 ms): goroutines with admitted work, ready to run, would wait
//     behind its whole pipeline. Under a flood of 2,000
//     connections pipelining 64 refused requests each, an admitted probe
//     beside it was answered 1.5 to 5 times as often with the turn as
//     without (bench/scripts/proxy-flood.sh PIPELINE=64, interleaved
//     rounds, docs/bench/proxy.md).
//   - After an answer the read loop waits for the connection's next
//     request without reading first (see the read loop above): the
//     ordinary path's read that finds nothing (EAGAIN) and parks the
//     goroutine in the poller is gone, and with it a third of a
//     refusal's system calls (1.00 reads per refusal instead of 2.00,
//     counted with perf; docs/bench/serve.md). Three earlier ways to save
//     that read or to put the refused connection behind admitted work
//     were measured against a refusal flood with an admitted probe, and
//     none helped the probe: yielding before the read (runtime.Gosched)
//     keeps the refused goroutines runnable, so the run queue never
//     drains and the poller, which the scheduler asks only when it does
//     (or every 10 ms from sysmon), is starved of its turn to wake
//     admitted work; a short sleep when the process is saturated wakes
//     the refused goroutines from the timer heap ahead of the run queue
//     (a woken goroutine runs next); yielding after the next read did no
//     better than not yielding. The loop parks a refused connection in
//     the poller as before, in the same queue as an upstream's answer,
//     in arrival order, which is as fair as Go's scheduler allows.
//
// # Why not fasthttp's server
//
// github.com/valyala/fasthttp (v1.78.0) was the first candidate. Its
// server writes an answer only after the handler returns, so a net/http
// handler that streams a file under a disk slot cannot run on it as is:
// its adaptor runs each handler on a goroutine of its own and pipes the
// body, which drops Content-Length and sendfile. Its timeouts are
// per-phase deadlines rather than net/http's renewed send and body
// deadlines, its ConnState points differ (connlimit's counters rely on
// net/http's), and its parser accepts what the engine must refuse (a field
// name with a space, "Transfer-Encoding: identity", Content-Length with
// Transfer-Encoding, read as chunked), so a strict pass over the head was
// needed anyway, at which point the head was parsed. Measured in one run
// on one core (docs/bench/serve.md, bench/scripts/serve-refusal-cost.sh):
// the whole of sluice serve's disk-gate refusal on this engine (path,
// cache, gate, counters, the answer) cost 30.3 µs of CPU against 30.7 µs
// for fasthttp's server writing a canned 503 and doing nothing else, and
// 42.9 µs for net/http's canned 503. The upstream client for the proxy
// is a separate choice (fasthttp's HostClient remains the candidate).
//
// # The proxy on the engine
//
// The proxy takes its decisions on the engine's parsed head (route,
// quota, gates, the pre-rendered refusal) and forwards an admitted
// request without a body natively, through Stream; what it does not
// forward natively (bodies, HTTP/1.0, upgrades, stale copies) crosses
// the bridge. What remains for the proxy on the engine: request bodies
// natively (the bridge's body reader already frames them), and an
// upstream client that takes the parsed head as it is rather than an
// *http.Request.
package engine
