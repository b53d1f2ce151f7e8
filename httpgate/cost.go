package httpgate

import (
	"fmt"
	"net/http"
	"sort"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/sluicehq/sluice/admit"
)

// A RequestFunc decides what one HTTP request asks of a gate: how many
// slots it costs (Weight), its kind and its class. Cost-weighted
// admission starts here: a scan that reads a thousand rows and a point
// read that reads one should not be billed the same slot. It must be
// cheap, must not read the body, and must be safe for concurrent use. A
// decision the gate cannot consider (a weight outside 1..admit.MaxCapacity,
// a kind or class the gate does not have) is a wiring mistake: the
// request is answered 500 by the Middleware's RefusalFunc.
type RequestFunc func(r *http.Request) admit.Request

// GuardFunc is GuardFor with the request decided per HTTP request by
// decide (RouteCosts, WithClassHeader, or your own).
func (m *Middleware) GuardFunc(g *admit.Gate, decide RequestFunc, next http.Handler) http.Handler {
	if g == nil {
		panic("httpgate: GuardFunc with a nil gate")
	}
	if decide == nil {
		panic("httpgate: GuardFunc with a nil RequestFunc")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve(w, r, next, g, decide(r))
	})
}

// RouteCosts returns a RequestFunc that charges a request by its URL
// path: the weight of the longest prefix in costs that the path starts
// with, or one slot when none does. Prefixes must start with "/" and
// weights must be within 1..admit.MaxCapacity; anything else is an error
// wrapping ErrInvalidConfig. The lookup is a walk over the prefixes,
// longest first, so keep the table small (it is meant for a handful of
// expensive routes).
func RouteCosts(costs map[string]int64) (RequestFunc, error) {
	type route struct {
		prefix string
		weight int64
	}
	routes := make([]route, 0, len(costs))
	for p, w := range costs {
		if !strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("%w: route cost prefix %q must start with /", ErrInvalidConfig, p)
		}
		if w < 1 || w > admit.MaxCapacity {
			return nil, fmt.Errorf("%w: route %q costs %d slots: want 1..%d", ErrInvalidConfig, p, w, admit.MaxCapacity)
		}
		routes = append(routes, route{p, w})
	}
	sort.Slice(routes, func(i, j int) bool {
		if len(routes[i].prefix) != len(routes[j].prefix) {
			return len(routes[i].prefix) > len(routes[j].prefix)
		}
		return routes[i].prefix < routes[j].prefix
	})
	return func(r *http.Request) admit.Request {
		for _, rt := range routes {
			if strings.HasPrefix(r.URL.Path, rt.prefix) {
				return admit.Request{Weight: rt.weight}
			}
		}
		return admit.Request{Weight: 1}
	}, nil
}

// Weight returns a RequestFunc that charges every request n slots of the
// gate's first kind: for a route whose whole handler is one expensive
// thing (GuardFunc(g, httpgate.Weight(8), scanHandler)).
func Weight(n int64) RequestFunc {
	return func(*http.Request) admit.Request { return admit.Request{Weight: n} }
}

// WithClassHeader returns a RequestFunc that decides like f (one slot when
// f is nil) and takes the class from the request header name: one of
// critical_plus, critical, sheddable_plus, sheddable (admit.ParseClass).
// A missing, unknown or oversized value gets the default class, never an
// error: a header is input, and a bad one must not buy a better class or
// fail the request. It panics if name is not a valid header field name.
func WithClassHeader(f RequestFunc, name string) RequestFunc {
	if !httpguts.ValidHeaderFieldName(name) {
		panic(fmt.Sprintf("httpgate: WithClassHeader(%q): not a valid header field name", name))
	}
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request) admit.Request {
		var req admit.Request
		if f != nil {
			req = f(r)
		}
		req.Class = headerClass(r, name)
		return req
	}
}

// ClassFromHeader returns middleware that reads the class of each request
// from the header name (as WithClassHeader does) and puts it in the
// request's context (admit.WithClass), for gates entered deeper down that
// take their class from the context (admit.Queueing.ContextClass), such as
// a file server's disk gate. A request without the header, or with the
// default class, passes through untouched. It returns an error wrapping
// ErrInvalidConfig if name is not a valid header field name.
func ClassFromHeader(name string) (func(http.Handler) http.Handler, error) {
	if !httpguts.ValidHeaderFieldName(name) {
		return nil, fmt.Errorf("%w: priority header %q is not a valid header field name", ErrInvalidConfig, name)
	}
	name = http.CanonicalHeaderKey(name)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if c := headerClass(r, name); c != admit.ClassCritical {
				r = r.WithContext(admit.WithClass(r.Context(), c))
			}
			next.ServeHTTP(w, r)
		})
	}, nil
}

// headerClass is the class named by the first value of header name, or
// the default class.
func headerClass(r *http.Request, name string) admit.Class {
	vals := r.Header[name]
	if len(vals) == 0 {
		return admit.ClassCritical
	}
	return HeaderClass(vals[0])
}

// HeaderClass is ClassFromHeader's rule for the priority header's first
// value, for a front end that reads the header itself: the class it
// names, or critical for an empty, unknown or oversized value (a bad
// header never buys a better class).
func HeaderClass(value string) admit.Class {
	c, _ := admit.ParseClass(strings.TrimSpace(value))
	return c
}
