// Package httpgate puts net/http handlers behind admission gates
// (package admit) and turns refusals into the HTTP answers of the sluice
// contract: 503 with a JSON reason and Retry-After.
//
// # Usage
//
// Gate a whole handler:
//
//	mw, err := httpgate.New(httpgate.Config{})
//	work, err := admit.New(admit.Config{Name: "work", Capacity: 8})
//	http.Handle("/report", mw.Guard(work, reportHandler))
//
// Or take the slot at the point of cost, so cheap answers never wait:
//
//	http.Handle("/item", mw.Lazy(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
//		if data, ok := cache.Get(r.URL.Path); ok {
//			w.Write(data) // no slot taken, nothing to release
//			return
//		}
//		if _, err := httpgate.Acquire(r.Context(), db); err != nil {
//			httpgate.Refuse(w, r, err) // 503, reason, Retry-After
//			return
//		}
//		// the slot is held until this handler returns
//		data, err := loadFromDB(r.Context(), r.URL.Path)
//		...
//	})))
//
// A handler's context is never shortened by a client's header unless
// the service asks for it: see Deadlines below.
//
// # Design goals
//
//   - Take a slot at the point of cost, not at the door. A static-file
//     handler that answers most requests from memory must not spend a
//     disk-read slot on them, or cache hits are refused while the disk
//     sits idle. So besides a middleware that gates a whole handler
//     (Guard), the package offers lazy acquisition: the handler calls
//     Acquire right before the expensive step.
//   - Release exactly once, on every path. Whatever a handler does —
//     return normally, write a 5xx, panic, or lose its client — every slot
//     it took through Acquire is released when it returns, once, with an
//     outcome that says how the work ended. A request that never took a
//     slot releases nothing.
//   - Refuse cheaply and honestly. A refusal is written without reading the
//     request body, costs about as much as the cheapest 200, and tells the
//     client what happened and when to come back.
//
// # Parts
//
// A Middleware (from New) is configured once. Its Lazy method wraps a
// handler so that each request carries a holder: a small per-request record
// of the permits it took. Acquire (a package function taking the request's
// context) asks a gate for a slot and records the permit in that holder;
// the holder releases what it holds when the handler returns. Guard is Lazy
// plus an Acquire before the handler runs, for work whose cost is the
// request itself. Deadline applies only the deadline header (below), for
// handlers that take and release their slots themselves, as package static
// does around each disk read; without the header it costs nothing.
//
// The outcome recorded on release is, in order of precedence:
//
//  1. the one the handler set with SetOutcome, if any;
//  2. OutcomePanic if the handler did not return normally (a panic, or
//     runtime.Goexit). The panic is not recovered: the slot is released in
//     a deferred call while the panic keeps unwinding, so net/http still
//     sees it, with its original stack;
//  3. OutcomeCanceled if the request's context ended (client gone, or the
//     deadline from the deadline header passed);
//  4. OutcomeError if the handler answered with a 5xx status;
//  5. OutcomeOK.
//
// To see the status, the holder wraps the ResponseWriter. The wrapper
// forwards Write, WriteHeader, Flush and ReadFrom (so sendfile still works)
// and has an Unwrap method, so http.ResponseController reaches Hijack,
// SetReadDeadline and the rest. Code that type-asserts the ResponseWriter
// to http.Hijacker directly must use http.ResponseController instead.
//
// # Refusals
//
// Refusals are written by a RefusalFunc (Config.Refusal; WriteRefusal by
// default), reached from handlers through Refuse so that a custom writer
// applies to lazy acquisitions too. The default follows the contract:
//
//   - overload (full, queue_full, wait_timeout, deadline, shed,
//     breaker_open), a client that went away while queued (canceled), and
//     shutdown (closed): 503 Service Unavailable,
//     {"error":"BUSY","gate":"<gate>","reason":"<reason>"};
//   - a per-client quota (reason rate): 429 Too Many Requests,
//     {"error":"RATE_LIMITED","gate":"<gate>","reason":"rate"};
//
// both with Retry-After from RejectedError.RetryAfterSeconds and
// Content-Type: application/json. A closed gate
// also sends Connection: close, so a client on a keep-alive connection
// moves to another instance. Errors that are not refusals (a handler
// calling Acquire without a holder) get a 500.
//
// # Deadlines
//
// A request may carry its own time budget in a header
// (Config.DeadlineHeader, "Request-Timeout" by default). It is read only
// where the service opts in: by Config.HeaderDeadline for Guard and Lazy,
// or by wrapping a handler in Deadline. The value is a positive number
// with an optional unit, "ms", "s" or "m"; a bare number is seconds, so
// "2", "2s", "0.5" and "500ms" all work (ParseDeadline has the rule). The
// budget becomes the request context's deadline, kept within
// [Config.MinDeadline, Config.MaxDeadline] (100 ms and 30 s by default):
// time spent queued for a slot counts against it, a waiter whose deadline
// passes leaves the queue refused with reason deadline, and no client can
// cut a handler's context below the floor. A malformed value is answered
// with 400 and a JSON body naming the header; the handler does not run.
//
// # Clients that leave while queued
//
// A waiter leaves the gate's queue as soon as the request's context is
// canceled, and is counted as rejected with reason canceled, never
// admitted. net/http cancels the context when the client closes the
// connection (HTTP/1.1) or resets the stream (HTTP/2). For HTTP/1.1 it
// notices the close only once the request body has been read to the end,
// so a request with an unread body that is queued in a gate keeps its
// place until it is granted or times out; bodiless requests (GET, HEAD)
// are noticed at once.
//
// # Deciding without an *http.Request
//
// Quota keys and decides on net/http requests. A front end that parses
// requests itself (sluice's own HTTP/1.1 engine) uses the same rules in
// their other form: a RequestKey reads the peer's address and the header
// fields through Fields (which http.Header satisfies), and KeyHeader and
// KeyClientIP are HeaderKey and ClientIPKey turned into KeyFuncs; a
// QuotaRule is Quota's decision (tokens spent, RateLimit headers) with
// nothing of net/http around it, and Quota is written on it. Admission
// is Guard's decision taken the same way: TryAdmit (and TryAcquire for a
// second gate) without waiting, before any *http.Request exists, then
// ServeAdmitted hands the slots to the request's holder, which serves and
// releases them as Guard's does; HeaderClass is ClassFromHeader's rule
// for a header value.
//
// # Costs
//
// Per request, Lazy allocates one holder (which embeds the ResponseWriter
// wrapper) and the context value and request copy that carry it; a
// deadline header adds a timer. Acquire on a holder with room for its
// permit allocates nothing beyond what the gate does. Guard decides
// before it builds the context, so a refusal costs the holder, the
// gate's decision (which reuses its error value) and the response: about
// as much as the cheapest 200 the same server sends (docs/benchmarks.md, "httpgate").
package httpgate
