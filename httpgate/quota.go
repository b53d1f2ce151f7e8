package httpgate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/quota"
)

// A KeyFunc names the bucket a request spends from: a client, an API key,
// a tenant. It must be cheap and must not read the body.
type KeyFunc func(r *http.Request) string

// A CostFunc says how many tokens a request costs (values below 1 count
// as 1).
type CostFunc func(r *http.Request) int

// QuotaConfig configures a rate-quota middleware (Quota). Limiter is
// required; the other zero fields have defaults.
type QuotaConfig struct {
	// Limiter decides: a *quota.Quota for this process, or a fleet quota
	// from quota/redisquota.
	Limiter quota.Limiter
	// Key picks the bucket. Nil means KeyClientIP(nil): the peer's
	// address, X-Forwarded-For ignored.
	Key KeyFunc
	// Cost prices a request. Nil means 1 token per request.
	Cost CostFunc
	// Refusal writes refusals. Nil means WriteRefusal: 429 with
	// Retry-After and {"error":"RATE_LIMITED",...} for reason rate.
	Refusal RefusalFunc
	// NoRateLimitHeaders turns off the RateLimit-Policy and RateLimit
	// response headers.
	NoRateLimitHeaders bool
}

// Quota returns a handler that spends Cost(r) tokens of the bucket named
// by Key(r) before serving next. When the quota refuses, next does not
// run and the refusal is written: 429 Too Many Requests with Retry-After
// (the bucket's own refill time, whole seconds rounded up), the JSON body
// {"error":"RATE_LIMITED","gate":"<quota>","reason":"rate"}, and the
// RateLimit-Policy / RateLimit headers of the IETF httpapi rate-limit
// headers draft. Admitted responses carry the same two headers, so
// clients can pace themselves before they are refused. Several quotas
// stack: each adds its own list member to both headers.
//
// The headers describe a token bucket in the draft's window terms:
//
//	RateLimit-Policy: "<name>";q=<quota>;w=<window>
//	RateLimit: "<name>";r=<remaining>;t=<seconds until the bucket is full>
//
// where w is the bucket's refill time (Burst/Rate) rounded up to whole
// seconds, at least 1, and q the tokens the rate grants in w. On a refusal
// t is the Retry-After value.
func Quota(cfg QuotaConfig, next http.Handler) (http.Handler, error) {
	if cfg.Limiter == nil {
		return nil, fmt.Errorf("%w: QuotaConfig.Limiter is nil", ErrInvalidConfig)
	}
	if next == nil {
		return nil, fmt.Errorf("%w: Quota with a nil handler", ErrInvalidConfig)
	}
	key := cfg.Key
	if key == nil {
		key = KeyClientIP(nil)
	}
	refusal := cfg.Refusal
	if refusal == nil {
		refusal = WriteRefusal
	}
	rule := NewQuotaRule(cfg.Limiter, cfg.NoRateLimitHeaders)
	cost := cfg.Cost
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := 1
		if cost != nil {
			n = cost(r)
		}
		a, err := rule.Decide(r.Context(), key(r), n)
		if a.Policy != "" {
			h := w.Header()
			h.Add("RateLimit-Policy", a.Policy)
			if a.RateLimit != "" {
				h.Add("RateLimit", a.RateLimit)
			}
		}
		if err != nil {
			refusal(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	}), nil
}

// A QuotaRule is Quota's decision apart from net/http: it spends a
// request's tokens and says which RateLimit headers the answer carries,
// so that a front end building no *http.Request decides exactly as Quota
// does. Safe for concurrent use.
type QuotaRule struct {
	lim            quota.Limiter
	policy, prefix string // "" without the headers
}

// NewQuotaRule returns the rule of a Quota over lim; noHeaders turns the
// RateLimit headers off (QuotaConfig.NoRateLimitHeaders).
func NewQuotaRule(lim quota.Limiter, noHeaders bool) *QuotaRule {
	q := &QuotaRule{lim: lim}
	if !noHeaders {
		q.policy, q.prefix = policyHeader(lim.Shape())
	}
	return q
}

// QuotaAnswer is the RateLimit header values an answer carries after a
// quota's decision ("" for none).
type QuotaAnswer struct {
	Policy    string // RateLimit-Policy
	RateLimit string // RateLimit
}

// Decide spends cost tokens (below 1 counts as 1) of key's bucket. It
// returns the header values the answer carries and, when the quota
// refuses, its refusal (a *admit.RejectedError for reason rate, or what
// the limiter returned), to write as WriteRefusal does.
func (q *QuotaRule) Decide(ctx context.Context, key string, cost int) (QuotaAnswer, error) {
	d, err := q.lim.Decide(ctx, key, max(cost, 1))
	if q.policy == "" {
		return QuotaAnswer{}, err
	}
	a := QuotaAnswer{Policy: q.policy}
	var re *admit.RejectedError
	if errors.As(err, &re) && re.Reason() == admit.ReasonRate {
		a.RateLimit = q.RefusedRateLimit(re.RetryAfterSeconds())
	} else if err == nil {
		a.RateLimit = q.prefix + "r=" + strconv.Itoa(d.Remaining) + ";t=" + strconv.Itoa(ceilSeconds(d.Reset))
	}
	return a, err
}

// Policy returns the RateLimit-Policy value of every answer ("" with the
// headers off).
func (q *QuotaRule) Policy() string { return q.policy }

// RefusedRateLimit returns the RateLimit value of a refusal whose
// Retry-After is retry seconds ("" with the headers off): it depends on
// nothing else, so a front end may render a refusal once per value.
func (q *QuotaRule) RefusedRateLimit(retry int) string {
	if q.policy == "" {
		return ""
	}
	return q.prefix + "r=0;t=" + strconv.Itoa(retry)
}

// policyHeader returns the RateLimit-Policy member for p and the start of
// its RateLimit member.
func policyHeader(p quota.Shape) (policy, prefix string) {
	window := max(1, ceilSeconds(p.RefillTime()))
	q := int64(math.Round(p.Rate * float64(window)))
	name := strconv.Quote(p.Name) // quota names are tokens: a valid sf-string
	return name + ";q=" + strconv.FormatInt(max(q, 1), 10) + ";w=" + strconv.Itoa(window), name + ";"
}

func ceilSeconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return int((d + time.Second - 1) / time.Second)
}

// KeyHeader keys requests by the value of a request header (an API key,
// a tenant id). Requests without it share one bucket, keyed "", so
// leaving the header out does not escape the quota. It panics if name is
// not a valid header field name. It is HeaderKey(name).Func().
func KeyHeader(name string) KeyFunc { return HeaderKey(name).Func() }

// KeyClientIP keys requests by the client's IP address. The client is the
// peer (RemoteAddr) unless the peer is in trusted: then X-Forwarded-For is
// read from the right, skipping trusted proxies, and the first address
// not in trusted is the client (the rightmost address a trusted proxy
// vouched for; addresses to its left were written by the client itself
// and could be anything). A malformed entry stops the walk at the last
// good address. With trusted empty, X-Forwarded-For is ignored. It is
// ClientIPKey(trusted).Func().
func KeyClientIP(trusted []netip.Prefix) KeyFunc { return ClientIPKey(trusted).Func() }

func parseHostAddr(hostport string) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// CostByPathPrefix prices requests by the longest matching URL path
// prefix in costs; paths matching none cost def (below 1 counts as 1).
func CostByPathPrefix(def int, costs map[string]int) CostFunc {
	type rule struct {
		prefix string
		cost   int
	}
	rules := make([]rule, 0, len(costs))
	for p, c := range costs {
		rules = append(rules, rule{p, c})
	}
	sort.Slice(rules, func(i, j int) bool { return len(rules[i].prefix) > len(rules[j].prefix) })
	def = max(def, 1)
	return func(r *http.Request) int {
		for _, ru := range rules {
			if strings.HasPrefix(r.URL.Path, ru.prefix) {
				return ru.cost
			}
		}
		return def
	}
}
