package httpgate

import (
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

	"golang.org/x/net/http/httpguts"

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
	p := cfg.Limiter.Shape()
	var policy, prefix string
	if !cfg.NoRateLimitHeaders {
		policy, prefix = policyHeader(p)
	}
	lim, cost := cfg.Limiter, cfg.Cost
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := 1
		if cost != nil {
			n = max(cost(r), 1)
		}
		d, err := lim.Decide(r.Context(), key(r), n)
		if policy != "" {
			h := w.Header()
			h.Add("RateLimit-Policy", policy)
			var re *admit.RejectedError
			if errors.As(err, &re) && re.Reason() == admit.ReasonRate {
				h.Add("RateLimit", prefix+"r=0;t="+strconv.Itoa(re.RetryAfterSeconds()))
			} else if err == nil {
				h.Add("RateLimit", prefix+"r="+strconv.Itoa(d.Remaining)+";t="+strconv.Itoa(ceilSeconds(d.Reset)))
			}
		}
		if err != nil {
			refusal(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	}), nil
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
// not a valid header field name.
func KeyHeader(name string) KeyFunc {
	if !httpguts.ValidHeaderFieldName(name) {
		panic("httpgate: KeyHeader: invalid header field name " + strconv.Quote(name))
	}
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request) string {
		if v := r.Header[name]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
}

// KeyClientIP keys requests by the client's IP address. The client is the
// peer (RemoteAddr) unless the peer is in trusted: then X-Forwarded-For is
// read from the right, skipping trusted proxies, and the first address
// not in trusted is the client (the rightmost address a trusted proxy
// vouched for; addresses to its left were written by the client itself
// and could be anything). A malformed entry stops the walk at the last
// good address. With trusted empty, X-Forwarded-For is ignored.
func KeyClientIP(trusted []netip.Prefix) KeyFunc {
	trusted = append([]netip.Prefix(nil), trusted...)
	isTrusted := func(a netip.Addr) bool {
		for _, p := range trusted {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	return func(r *http.Request) string {
		peer, ok := parseHostAddr(r.RemoteAddr)
		if !ok {
			return r.RemoteAddr
		}
		if len(trusted) == 0 || !isTrusted(peer) {
			return peer.String()
		}
		client := peer
		vals := r.Header["X-Forwarded-For"]
		for i := len(vals) - 1; i >= 0; i-- {
			parts := strings.Split(vals[i], ",")
			for j := len(parts) - 1; j >= 0; j-- {
				a, err := netip.ParseAddr(strings.TrimSpace(parts[j]))
				if err != nil {
					return client.String()
				}
				client = a.Unmap()
				if !isTrusted(client) {
					return client.String()
				}
			}
		}
		return client.String()
	}
}

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
