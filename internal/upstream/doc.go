// Package upstream is the HTTP/1.1 client of sluice's proxy toward its
// upstreams: an http.RoundTripper with a keep-alive pool per upstream,
// cheaper per request than net/http's Transport, and strict about
// framing in both directions.
//
// # What it does
//
//   - A pool per upstream (scheme, host, port): idle connections, newest
//     first, at most Config.MaxIdlePerHost of them, each closed after
//     Config.IdleTimeout. Before an idle connection carries a request,
//     one non-blocking look at its socket (recv with MSG_PEEK and
//     MSG_DONTWAIT) tells whether the upstream closed it meanwhile;
//     net/http keeps a reading goroutine per connection to know the same.
//     A request without a body (or with one short enough to go with its
//     head) is written and its answer's first bytes read inside one
//     syscall.RawConn.Read call, the look first: Go's poller forgets a
//     socket's readiness when a read begins, so a write followed by a
//     read would cost a read that finds nothing (the upstream has not
//     answered yet) before the wait. The look, the write and the reads
//     there are raw system calls on the non-blocking socket, which
//     cannot block: the runtime's entry to a call that may block wakes
//     its monitor thread whenever the process was idle, a context
//     switch per few requests on a lightly loaded proxy (the engine's
//     package doc has the figures). What the write leaves goes through
//     the connection's Write, which waits for room. A connection the
//     look finds closed, or holding bytes nobody asked for, takes
//     nothing, and the request goes out on another whatever its
//     method. A request that fails on a reused connection before any byte of an
//     answer is sent once more on a new one when it can be (no body or
//     GetBody, an idempotent method or an Idempotency-Key), as net/http
//     does.
//   - Deadlines: Config.DialTimeout (and the TLS handshake), HeaderTimeout
//     from the request's end to the answer's head, BodyIdleTimeout for
//     each wait for the answer's body; the request's context ends the
//     exchange at any point (the connection is closed, and the error is
//     the context's cause). RoundTripLimits adds a request's own bounds
//     (Limits: a header timeout or deadline counting the dial too, a body
//     idle timeout), the sooner winning. All are socket deadlines, so a
//     caller that times its attempts this way needs no context or timer
//     per attempt; a deadline left on a connection after its head is
//     moved by the next exchange only when it ends more than a hundredth
//     of that exchange's bound sooner, which saves a runtime timer's move
//     per request on a busy connection. A request context that is a
//     CancelWatcher is watched through one function it keeps, instead of
//     context.AfterFunc's registration per request.
//   - Fields: RoundTripFields takes some or all of a request's header
//     fields as a list (Fields) beside its Header, for a caller that has
//     the head as one (a proxy forwarding what it parsed). Each field is
//     checked once, when added, by the rules Header's fields are checked
//     by on every try, and kept as the line it is written as, so the
//     client neither hashes, sorts nor checks it again; they are written
//     in their order after Header's. A request with Fields gets no
//     default User-Agent. Fields refuse the framing fields, Host and
//     Connection, which the client writes itself.
//   - Answers as a list: with Limits.Answer an ordinary answer (a status
//     from 200 to 399 that announces no trailers) comes with its fields
//     in a list the caller keeps (package hfield), in the order the
//     upstream sent them, and a nil Header: a proxy that forwards the
//     head builds no map, two allocations and a hash per field fewer.
//     The framing checks are the same on either form (the fuzz test
//     FuzzParseResponse holds the two parses equal). An error status,
//     whose Retry-After a retry policy reads (and whose Header it writes),
//     a 1xx or 101, and an answer with trailers keep their Header.
//   - Streaming both ways. A request body of known length up to 64 KiB
//     is read whole first and written with the head in one write (as
//     nginx buffers request bodies): a client whose body fails fails
//     before the upstream has seen a byte. A larger or unknown-length
//     body streams from a goroutine while the answer is read, so an
//     upstream may answer early or echo as it reads; the answer's body
//     is read straight into the caller's buffer.
//   - Trailers both ways: Request.Trailer's names are declared and their
//     values sent after a chunked body; an answer's declared and sent
//     trailers fill Response.Trailer at the body's end.
//   - Upgrades: a 101 answer's Body is the connection itself, an
//     io.ReadWriteCloser (what httputil.ReverseProxy tunnels through).
//   - Informational answers are skipped (at most five); 1xx other than
//     100 reach an httptrace.ClientTrace's Got1xxResponse, through which
//     httputil.ReverseProxy forwards them.
//
// # One message, one reading
//
// The request it writes has exactly one framing: Content-Length for a
// body of known length, chunked otherwise (or with trailers),
// "Content-Length: 0" for a POST, PUT or PATCH without a body, nothing
// for other methods without one. Host, User-Agent and the framing fields
// are written from the request's own fields, never copied from its
// Header. A method, target, Host or field that could end a line or a
// message early (CR, LF, a control byte or a space where none may be) is
// refused with ErrInvalidRequest before anything is sent. When the body
// fails or is shorter than declared, the connection is closed before
// the message is complete: the upstream never takes a truncated body for
// a whole request.
//
// Answers are read as strictly: CRLF line ends, no obsolete folding, a
// Transfer-Encoding only if it is exactly chunked and never beside a
// Content-Length, Content-Lengths that agree. Anything else fails the
// exchange with ErrBadResponse and closes the connection; bytes after an
// answer's end close it too, so nothing an upstream sends can be taken
// for the next request's answer.
//
// # Where it differs from net/http's Transport
//
// It asks for no compression (no Accept-Encoding is added, nothing is
// decompressed): the upstream sees the client's own Accept-Encoding. It
// sends a body at once rather than waiting for 100 Continue. It speaks
// HTTP/1.1 only, https included (ALPN http/1.1). It uses no proxy from
// the environment.
//
// # Why not fasthttp's HostClient
//
// github.com/valyala/fasthttp's HostClient was measured beside it
// (bench/proxy: BenchmarkUpstreamClients). It is not an
// http.RoundTripper, so the proxy's retry policy, breaker, passive
// health and httputil.ReverseProxy's header, trailer, 1xx and upgrade
// handling would have to be written again around it; it buffers a
// response body unless told to stream, and it reads responses leniently
// (it reconciles a Content-Length beside a Transfer-Encoding). The
// figures are in docs/bench/proxy.md.
package upstream
