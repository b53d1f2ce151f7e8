package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/httpgate"
	"github.com/sluicehq/sluice/internal/quotakey"
	"github.com/sluicehq/sluice/internal/ratespec"
	"github.com/sluicehq/sluice/internal/redisconf"
	"github.com/sluicehq/sluice/quota"
	"github.com/sluicehq/sluice/quota/redisquota"
)

// quotaSpec is one parsed --quota value.
type quotaSpec struct {
	name      string
	rate      float64 // tokens per second
	burst     int
	keyHeader string // "" means key=ip
	costs     map[string]int
	maxKeys   int
}

// maxBurst bounds burst and cost values so a typo cannot ask for a bucket
// whose arithmetic overflows.
const maxBurst = 1_000_000_000

// parseQuotaSpec parses 'name=per-client,rate=100/s,burst=20,key=header:X-Api-Key,cost=/search:50'.
// Every error names the part that is wrong.
func parseQuotaSpec(s string) (quotaSpec, error) {
	q := quotaSpec{costs: map[string]int{}}
	if strings.TrimSpace(s) == "" {
		return q, errors.New("empty quota: want e.g. name=per-client,rate=100/s,burst=20,key=header:X-Api-Key")
	}
	seen := map[string]bool{}
	for part := range strings.SplitSeq(s, ",") {
		field, val, ok := strings.Cut(part, "=")
		if !ok || field == "" {
			return q, fmt.Errorf("part %q: want field=value", part)
		}
		if seen[field] && field != "cost" {
			return q, fmt.Errorf("part %q: %s given twice", part, field)
		}
		seen[field] = true
		var err error
		switch field {
		case "name":
			err = quota.CheckName(val)
		case "rate":
			q.rate, err = ratespec.Parse(val)
		case "burst":
			q.burst, err = parseCount(val)
		case "max-keys":
			q.maxKeys, err = parseCount(val)
		case "key":
			q.keyHeader, err = quotakey.Parse(val)
		case "cost":
			err = q.parseCost(val)
		default:
			return q, fmt.Errorf("part %q: unknown field %q (want name, rate, burst, key, cost or max-keys)", part, field)
		}
		if err != nil {
			return q, fmt.Errorf("part %q: %v", part, err)
		}
		if field == "name" {
			q.name = val
		}
	}
	if q.name == "" {
		return q, errors.New("missing name=: every quota needs a name (its metric label)")
	}
	if q.rate == 0 {
		return q, fmt.Errorf("quota %q: missing rate=, e.g. rate=100/s", q.name)
	}
	if q.burst == 0 {
		q.burst = max(1, int(math.Ceil(q.rate)))
		if q.burst > maxBurst {
			return q, fmt.Errorf("quota %q: rate %s/s needs an explicit burst= of at most %d", q.name, figure(q.rate), maxBurst)
		}
	}
	for prefix, c := range q.costs {
		if c > q.burst {
			return q, fmt.Errorf("quota %q: cost=%s:%d exceeds burst=%d, so such a request could never pass", q.name, prefix, c, q.burst)
		}
	}
	return q, nil
}

func parseCount(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxBurst {
		return 0, fmt.Errorf("want a whole number from 1 to %d", maxBurst)
	}
	return n, nil
}

func (q *quotaSpec) parseCost(v string) error {
	i := strings.LastIndexByte(v, ':')
	if i < 0 {
		return errors.New("want cost=<path prefix>:<tokens>, e.g. cost=/search:50")
	}
	prefix := v[:i]
	if !strings.HasPrefix(prefix, "/") || strings.ContainsAny(prefix, " \t?#") {
		return fmt.Errorf("path prefix %q: want a path starting with /", prefix)
	}
	n, err := parseCount(v[i+1:])
	if err != nil {
		return fmt.Errorf("tokens %q: %v", v[i+1:], err)
	}
	if _, dup := q.costs[prefix]; dup {
		return fmt.Errorf("path prefix %q priced twice", prefix)
	}
	q.costs[prefix] = n
	return nil
}

// quotaList is the repeatable --quota flag. One value may hold several
// quotas separated by ';' (so SLUICE_QUOTA can carry more than one).
type quotaList []quotaSpec

func (l *quotaList) String() string {
	if l == nil {
		return ""
	}
	names := make([]string, len(*l))
	for i, q := range *l {
		names[i] = q.name
	}
	return strings.Join(names, ";")
}

func (l *quotaList) Set(v string) error {
	for one := range strings.SplitSeq(v, ";") {
		q, err := parseQuotaSpec(one)
		if err != nil {
			return err
		}
		for _, o := range *l {
			if o.name == q.name {
				return fmt.Errorf("quota name %q used twice", q.name)
			}
		}
		*l = append(*l, q)
	}
	return nil
}

// quotaOptions are serve's quota flags.
type quotaOptions struct {
	quotas    quotaList
	redisURL  string
	instances int
	fail      string
	mode      string
	timeout   time.Duration
	trusted   string

	closers []func()
	// states are the quotas' /state sections, filled by wrap.
	states map[string]func() any
	// metered are the quotas, filled by wrap, for promsluice.Metrics.Add
	// (which also attributes their refusals): --quota's, and routeQuotas.
	metered []any
	// fleetCfg is fleet's template, built once.
	fleetCfg *redisquota.Config
	// routeQuotas reads the quotas other than --quota (the proxy's route
	// quotas, built with fleet's template, as many as the last reload
	// left): wrap meters them with the --quota ones, and --quota-redis is
	// not an error without --quota when it is set.
	routeQuotas func() []quota.Stats
}

// addQuotaFlags registers the quota flags on fs; trustedUsage is the help
// of --trusted-proxies, which means more in the proxy than in serve.
func addQuotaFlags(fs *flag.FlagSet, trustedUsage string) *quotaOptions {
	o := &quotaOptions{}
	fs.Var(&o.quotas, "quota", "a per-client rate quota `SPEC`, repeatable: name=NAME,rate=N/s,burst=N,key=ip|header:NAME[,cost=/prefix:N][,max-keys=N]; a refused request gets 429")
	fs.StringVar(&o.redisURL, "quota-redis", "", "share the quotas across instances through this Redis `URL` (redis://host:6379/0)")
	fs.IntVar(&o.instances, "quota-instances", 1, "instances sharing the quotas; while Redis is down each admits quota/instances (with --quota-fail open)")
	fs.StringVar(&o.fail, "quota-fail", "open", "while Redis is slow or down: open (this instance's share) or closed (refuse with 503)")
	fs.StringVar(&o.mode, "quota-mode", "exact", "fleet spending: exact (one Redis round trip per request) or lease (small batches of tokens)")
	fs.DurationVar(&o.timeout, "quota-redis-timeout", redisquota.DefaultTimeout, "longest wait for Redis before --quota-fail decides")
	fs.StringVar(&o.trusted, "trusted-proxies", "", trustedUsage)
	deprecate(fs, "quota-timeout", "quota-redis-timeout")
	deprecate(fs, "quota-trusted-proxies", "trusted-proxies")
	return o
}

// checkCompanions refuses --quota-* flags and --trusted-proxies given (on
// the command line or by their environment twins) when there is no quota
// for them to shape: they would be ignored without a word. haveQuota says
// whether there is one (a --quota, or in the proxy a route quota); except
// names flags that mean something without a quota.
func (o *quotaOptions) checkCompanions(fs *flag.FlagSet, haveQuota bool, except ...string) error {
	if haveQuota || len(o.quotas) > 0 {
		return nil
	}
	var set []string
	fs.Visit(func(f *flag.Flag) {
		companion := strings.HasPrefix(f.Name, "quota-") || f.Name == "trusted-proxies"
		if companion && !isAlias(f) && !slices.Contains(except, f.Name) {
			set = append(set, "--"+f.Name)
		}
	})
	if len(set) == 0 {
		return nil
	}
	return fmt.Errorf("%s without any --quota: there is no quota for %s to apply to", strings.Join(set, ", "), pluralThem(len(set)))
}

func pluralThem(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}

// wrap puts the quotas around h and records them in metered. With no
// --quota it returns h unchanged. Errors are usage errors.
func (o *quotaOptions) wrap(logger *slog.Logger, h http.Handler) (_ http.Handler, err error) {
	defer func() {
		if err != nil {
			o.close() // nothing opened survives a usage error
		}
	}()
	if len(o.quotas) == 0 {
		if o.redisURL != "" && o.routeQuotas == nil {
			return nil, errors.New("--quota-redis without any --quota")
		}
		o.metered = o.routeMetered()
		return h, nil
	}
	var trusted []netip.Prefix
	trusted, err = parsePrefixes("--trusted-proxies", o.trusted)
	if err != nil {
		return nil, err
	}
	fleet, err := o.fleet(logger)
	if err != nil {
		return nil, err
	}
	metered := o.routeMetered()
	// The last quota listed runs first: wrap from the inside out so the
	// first one listed is the outermost.
	for i := len(o.quotas) - 1; i >= 0; i-- {
		spec := o.quotas[i]
		var lim quota.Limiter
		if fleet != nil {
			fc := *fleet
			fc.Name, fc.Rate, fc.Burst, fc.MaxKeys = spec.name, spec.rate, spec.burst, spec.maxKeys
			fq, err := redisquota.New(fc)
			if err != nil {
				return nil, fmt.Errorf("--quota %s: %v", spec.name, err)
			}
			lim, metered = fq, append(metered, fq)
			o.state("quota."+spec.name, func() any {
				return struct {
					quota.Stats
					Fleet redisquota.State `json:"fleet"`
				}{fq.Stats(), fq.State()}
			})
		} else {
			lq, err := quota.New(quota.Config{Name: spec.name, Rate: spec.rate, Burst: spec.burst, MaxKeys: spec.maxKeys})
			if err != nil {
				return nil, fmt.Errorf("--quota %s: %v", spec.name, err)
			}
			lim, metered = lq, append(metered, lq)
			o.state("quota."+spec.name, func() any { return lq.Stats() })
		}
		key := httpgate.KeyClientIP(trusted)
		if spec.keyHeader != "" {
			key = httpgate.KeyHeader(spec.keyHeader)
		}
		var cost httpgate.CostFunc
		if len(spec.costs) > 0 {
			cost = httpgate.CostByPathPrefix(1, spec.costs)
		}
		if h, err = httpgate.Quota(httpgate.QuotaConfig{Limiter: lim, Key: key, Cost: cost}, h); err != nil {
			return nil, err
		}
	}
	if logger != nil {
		logger.Info("quotas on", "quotas", o.quotas.String(), "fleet", fleet != nil, "mode", o.mode, "fail", o.fail)
	}
	o.metered = metered
	return h, nil
}

// routeMetered returns the route quotas as a part for Metrics.Add (none
// without route quotas).
func (o *quotaOptions) routeMetered() []any {
	if o.routeQuotas == nil {
		return nil
	}
	return []any{o.routeQuotas}
}

// fleet checks the fleet flags and returns the template of a fleet quota
// (redisquota.Config without Name, Rate, Burst and MaxKeys) on the Redis
// of --quota-redis, or nil without --quota-redis. The client is opened
// once and closed by close; every quota built from the template, the
// proxy's route quotas included, shares it.
func (o *quotaOptions) fleet(logger *slog.Logger) (*redisquota.Config, error) {
	if o.fleetCfg != nil {
		return o.fleetCfg, nil
	}
	if o.instances < 1 {
		return nil, fmt.Errorf("--quota-instances %d: must be 1 or more", o.instances)
	}
	if o.timeout <= 0 {
		return nil, fmt.Errorf("--quota-redis-timeout %v: must be greater than zero", o.timeout)
	}
	var fail redisquota.Fallback
	switch o.fail {
	case "open":
	case "closed":
		fail = redisquota.FailClosed
	default:
		return nil, fmt.Errorf("--quota-fail %q: want open or closed", o.fail)
	}
	var mode redisquota.Mode
	switch o.mode {
	case "exact":
	case "lease":
		mode = redisquota.Lease
	default:
		return nil, fmt.Errorf("--quota-mode %q: want exact or lease", o.mode)
	}
	if o.redisURL == "" {
		return nil, nil
	}
	client, err := redisconf.NewClient(o.redisURL, o.timeout, logger)
	if err != nil {
		return nil, fmt.Errorf("--quota-redis %q: %v", o.redisURL, err)
	}
	o.closers = append(o.closers, func() { _ = client.Close() })
	o.fleetCfg = &redisquota.Config{Client: client, Mode: mode, Fallback: fail, Instances: o.instances, Timeout: o.timeout, Logger: logger}
	return o.fleetCfg, nil
}

// state records a /state section.
func (o *quotaOptions) state(name string, f func() any) {
	if o.states == nil {
		o.states = map[string]func() any{}
	}
	o.states[name] = f
}

// close releases what wrap opened (the Redis client).
func (o *quotaOptions) close() {
	for _, c := range o.closers {
		c()
	}
}

// parsePrefixes parses the comma-separated CIDRs (or addresses) of the
// flag named flagName.
func parsePrefixes(flagName, s string) ([]netip.Prefix, error) {
	if s == "" {
		return nil, nil
	}
	var out []netip.Prefix
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		p, err := netip.ParsePrefix(part)
		if err != nil {
			a, aerr := netip.ParseAddr(part)
			if aerr != nil {
				return nil, fmt.Errorf("%s: %q is not a CIDR or an address", flagName, part)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
