// Package retry makes calls to other services without turning their
// trouble into more load: bounded attempts with jittered backoff, a retry
// budget shared by a client's requests, client-side adaptive throttling,
// Retry-After weighed against the caller's deadline, a "do not retry"
// signal that keeps retries to one layer of a call chain, and deadline
// propagation. Transport applies all of it to any http.Client;
// Policy.RoundTripWith does the same for a caller that sends each
// attempt itself (a proxy that owns its outbound request and writes each
// attempt's deadline header in place, where Transport must copy the
// request); grpcsluice applies the same Policy to gRPC calls.
//
//	b, _ := breaker.New(breaker.Config{Name: "users-api"})
//	p, _ := retry.New(retry.Config{Name: "users-api", Breaker: b})
//	client := &http.Client{Transport: &retry.Transport{Policy: p}}
//	ctx, cancel := context.WithTimeout(ctx, 800*time.Millisecond)
//	defer cancel()
//	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
//	resp, err := client.Do(req) // ErrThrottled, ErrDeadline, a breaker refusal, or the answer
//
// # Why retries need a budget
//
// A retry is new load, sent exactly when the upstream has least room for
// it. If each of three layers of a call chain tries four times, one
// request to the top becomes 4 × 4 × 4 = 64 attempts on a failing bottom
// service, and the failure cannot end while callers keep multiplying it.
// Four rules stop that:
//
//   - Attempts per request are bounded (Config.MaxAttempts, default 3) and
//     spaced by exponential backoff with full jitter (a uniform draw below
//     the doubling ceiling), so callers that failed together do not return
//     together.
//   - A Budget shared by all requests of a client caps retries at a ratio
//     of requests over a sliding window (default 10 %), plus a small floor
//     per second so a quiet client can still retry. When everything fails
//     the client adds at most 10 % load, not 200 %.
//   - NoRetryHeader ("Sluice-No-Retry") means "overloaded, do not retry".
//     A server may send it with a refusal; the Transport adds it to every
//     retryable refusal it passes up after giving up. Callers that see it
//     do not retry, so in a chain only the layer nearest the failure
//     retries. Servers relaying an upstream's answer must relay the header.
//     With the signal and the budget, the 64× chain above becomes at most
//     1.1× the original requests plus the floor (TestAmplification).
//   - Only requests that are safe to repeat are retried: idempotent methods
//     (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) or requests carrying an
//     Idempotency-Key header (sent unchanged on every attempt, so the
//     upstream can recognise the operation), with a body that can be
//     replayed.
//
// # Throttling
//
// A Throttle refuses requests locally with probability
// max(0, (requests − K·accepts) / (requests + 1)) over a sliding window
// (K = 2 by default; requests include those refused locally). While the
// upstream accepts what it is sent, the probability is zero; when it
// refuses most requests, the client sends only about K times what it
// accepts, so the refusals themselves stop costing the upstream its
// capacity. A refusal before the first attempt returns ErrThrottled.
//
// # Deadlines
//
// Every attempt tells the upstream how long the caller will still wait: the
// context's remaining deadline less Config.DeadlineMargin, in the
// Request-Timeout header that sluice servers read (httpgate applies it to
// the handler's context); gRPC carries it in grpc-timeout. An attempt is
// never started without time left (ErrDeadline). Retry-After is honoured
// only if the remaining deadline covers the wait plus Config.ServiceTime;
// otherwise the server's refusal is returned at once, since waiting would
// only fail later. Without a deadline, waits above Config.MaxRetryAfter are
// refused the same way.
//
// # What counts as what
//
// Retryable: connection failures, 502, 503, 504, 429. Accepted (for the
// throttle): every answer except those and connection failures. Breaker
// failures: connection failures and 5xx; 429 says nothing about the
// upstream's health and is not counted; a call the caller canceled is
// Ignored.
//
// # Observing
//
// Policy.Stats counts every Event (attempts, retries, budget exhausted,
// throttled locally, Retry-After honoured or refused, deadline expired,
// breaker open, no-retry signal seen); Config.Observer receives them as
// they happen, and promsluice.Metrics (Add the policy) exports them to
// Prometheus.
//
// # Concurrency and cost
//
// Policy, Budget and Throttle are safe for concurrent use. Budget and
// Throttle each keep a ring of ten buckets under one mutex; an attempt
// takes each lock once or twice for a few additions. A successful call
// without a deadline sends the caller's own request and allocates
// nothing; with a deadline (or a retried body) the attempt is a shallow
// copy with its own header map, three allocations: the copy, which also
// holds the formatted Request-Timeout value, and the map's two. The
// caller's request and header map are never modified or shared, and the
// attempt stays valid after RoundTrip returns (resp.Request points at it).
//
// # Several upstreams
//
// Config.Breakers gives every upstream (the request's URL.Host, a gRPC
// target, or DoUpstream's argument) its own breaker from a breaker.Group,
// so one failing host does not make the client refuse calls to the others.
package retry
