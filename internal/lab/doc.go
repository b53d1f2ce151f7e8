// Package lab is a backpressure lab: a tiny HTTP server with one
// business slot (by default) that makes admission, refusal and release
// visible with nothing but curl.
//
// # Usage
//
//	l, err := lab.New(lab.Config{Slots: 1, HoldLimit: 30 * time.Second})
//	if err != nil { ... }
//	defer l.Close()
//	srv := &http.Server{Addr: "127.0.0.1:18440", Handler: l.Handler()}
//
// # Endpoints
//
//   - GET /work takes a slot and holds it until POST /release, or until
//     the hold limit passes (then 504 {"error":"LAB_WAIT_EXPIRED"}), or the
//     client goes away. On release it answers 200 {"result":"done"}. While
//     every slot is held, another GET /work is refused at once with 503,
//     Retry-After: 1 and exactly {"error":"BUSY"}.
//   - POST /release opens the latch the held requests wait on, like a
//     CountDownLatch: every held /work completes, and later /work
//     requests complete at once. The latch stays open; restart the lab for
//     a fresh one. It answers 200 {"released":true}.
//   - GET /state answers {"active":…,"admitted":…,"rejected":…,"completed":…}:
//     slots held now, admissions, refusals and completions since start.
//     completed counts the business step ending (done, expired, client
//     gone), not the response reaching the client.
//
// /release is an unauthenticated control: serve the lab on loopback.
//
// # Design
//
// The slot is an admit.Gate with no wait queue, and /work is put behind it
// with httpgate's Guard and a custom refusal writer that writes exactly
// {"error":"BUSY"}. So the slot is released on every path by the same code that
// releases slots in sluice serve: success, hold limit, client gone,
// shutdown (Close), or a panic.
package lab
