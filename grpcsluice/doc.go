// Package grpcsluice puts gRPC calls through sluice: server interceptors
// that admit each call through gates (and, later, adaptive limits and
// quotas) and answer refusals the way gRPC clients understand, and client
// interceptors that apply a retry.Policy (attempts, budget, throttling,
// breaker, deadline margin) and honour the server's pushback.
//
// Server:
//
//	work, _ := admit.New(admit.Config{Name: "work", Capacity: 64, MaxWaiters: 128})
//	s := grpcsluice.NewServer(grpcsluice.ServerConfig{
//		Admitters:   []grpcsluice.Admitter{grpcsluice.GateAdmitter{Gate: work, Wait: true}},
//		MinDeadline: 20 * time.Millisecond,
//	})
//	srv := grpc.NewServer(
//		grpc.UnaryInterceptor(s.UnaryServerInterceptor()),
//		grpc.StreamInterceptor(s.StreamServerInterceptor()))
//	healthpb.RegisterHealthServer(srv, health.NewServer()) // bypasses the gate
//
// Client:
//
//	p, _ := retry.New(retry.Config{Name: "users", Breaker: b})
//	c, _ := grpcsluice.NewClient(grpcsluice.ClientConfig{Policy: p})
//	cc, _ := grpc.NewClient(target, creds,
//		grpc.WithUnaryInterceptor(c.UnaryClientInterceptor()),
//		grpc.WithStreamInterceptor(c.StreamClientInterceptor()))
//
// # Admission on the server
//
// An Admitter is anything that admits one call or refuses it: GateAdmitter
// wraps an admit.Gate; an adaptive limit or a quota implements the same
// one-method interface. Admitters run in order before the handler, and
// their done functions run (in reverse) when it returns, so a slot is held
// exactly while the handler runs; a stream holds its admission until its
// handler returns. The call's context carries the incoming deadline
// (grpc-timeout), so a waiting admission never outlives the caller, and
// ServerConfig.MinDeadline refuses at once a call whose deadline leaves
// less than it: work that would time out must not take a slot.
//
// Refusals are mapped by reason: rate (a quota) → RESOURCE_EXHAUSTED;
// full, queue_full, wait_timeout, shed, breaker_open (overload) and closed
// (shutdown) → UNAVAILABLE; deadline → DEADLINE_EXCEEDED; canceled →
// CANCELLED. RESOURCE_EXHAUSTED and UNAVAILABLE carry the
// grpc-retry-pushback-ms trailer from the refusal's RetryAfter, plus
// sluice-reason and sluice-gate. The health service (grpc.health.v1.Health)
// bypasses admission by default, so probes answer under overload.
//
// # Calls from the client
//
// The unary client interceptor runs each call through retry.Policy.Do:
// before every attempt, the deadline (the attempt's context is shortened
// by the policy's margin, so grpc-timeout tells the server what the caller
// will really wait), the throttle and the breaker; after a refusal,
// whether to retry. UNAVAILABLE and RESOURCE_EXHAUSTED are retryable. A
// refusal with a pushback is an admission refusal (the handler never ran),
// so it is retried whatever the method, after at least the pushback and
// only if the deadline covers it; other UNAVAILABLEs are retried only for
// methods ClientConfig.Idempotent names. A negative pushback or the
// sluice-no-retry trailer stops retries.
//
// When the interceptor gives up on a refusal it returns a *GaveUpError
// (status.Code sees the original code). A server whose handler returns
// that error adds the sluice-no-retry trailer to its answer, so in a chain
// of services only the layer nearest the failure retries, as with
// retry.NoRetryHeader over HTTP.
//
// # Streams
//
// A server-streaming call (one request, a stream of answers) is retried
// like a unary call, but only until it commits: until the server sends
// its response headers (which come before its first message) the caller
// has received nothing, so opening the stream again and resending the
// one request loses and repeats nothing. That is gRPC's own rule for
// retries (gRFC A6). Because the request reaches the stream through
// SendMsg after the interceptor returns, the stream is opened on the
// caller's first Recv (or Header): local refusals and refusals the Policy
// gave up on are returned there, where a server-streaming caller already
// handles the server's errors. The breaker is told the result when the
// stream commits or fails.
//
// Client-streaming and bidirectional streams are not retried: their
// messages go out while the caller may already be receiving, so a retry
// would have to buffer and replay every message without knowing which
// ones the server acted on. Opening one checks the deadline, throttle and
// breaker once.
//
// # Per-upstream breakers
//
// With retry.Config.Breakers, every connection target (cc.Target()) has
// its own breaker, so one client Policy can call several services and a
// failing one opens only its own breaker.
package grpcsluice
