package load

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Target is one request the driver sends. The zero Method means GET; the zero
// Weight means 1.
type Target struct {
	Method string      `json:"method,omitempty"`
	URL    string      `json:"url"`
	Header http.Header `json:"headers,omitempty"`
	Body   []byte      `json:"body,omitempty"`
	Weight int         `json:"weight,omitempty"`
}

// Pick says how the driver chooses among several targets.
type Pick string

const (
	// RoundRobin takes targets in order, one each, ignoring weights.
	RoundRobin Pick = "round-robin"
	// Weighted spreads targets by Weight with smooth weighted round robin:
	// deterministic, and no target waits long for its share.
	Weighted Pick = "weighted"
)

// ErrBadTarget reports a target that cannot be sent: a malformed or
// non-HTTP URL, a bad method, a negative weight.
var ErrBadTarget = errors.New("load: bad target")

// CheckTarget validates t and returns it with defaults filled in.
func CheckTarget(t Target) (Target, error) {
	if t.Method == "" {
		t.Method = http.MethodGet
	}
	for _, r := range t.Method {
		if r < 'A' || r > 'Z' {
			return t, fmt.Errorf("%w: method %q is not an upper-case token", ErrBadTarget, t.Method)
		}
	}
	u, err := url.Parse(t.URL)
	if err != nil {
		return t, fmt.Errorf("%w: url %q: %v", ErrBadTarget, t.URL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return t, fmt.Errorf("%w: url %q: scheme must be http or https", ErrBadTarget, t.URL)
	}
	if u.Host == "" || u.Hostname() == "" {
		return t, fmt.Errorf("%w: url %q has no host", ErrBadTarget, t.URL)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return t, fmt.Errorf("%w: url %q has a bad port", ErrBadTarget, t.URL)
		}
	}
	if t.Weight < 0 {
		return t, fmt.Errorf("%w: url %q has negative weight %d", ErrBadTarget, t.URL, t.Weight)
	}
	if t.Weight == 0 {
		t.Weight = 1
	}
	if t.Weight > MaxWeight {
		return t, fmt.Errorf("%w: url %q has weight %d, over the bound: at most %d", ErrBadTarget, t.URL, t.Weight, MaxWeight)
	}
	for k, vs := range t.Header {
		for _, v := range vs {
			if err := CheckHeader(k, v); err != nil {
				return t, err
			}
		}
		if len(vs) == 0 {
			if err := CheckHeader(k, ""); err != nil {
				return t, err
			}
		}
	}
	return t, nil
}

// MaxWeight bounds a target's weight, so that the weighted picker's sums
// cannot overflow.
const MaxWeight = 1_000_000

// CheckHeader is the one check every header goes through, whatever its
// source (a --header flag, a targets file, a Config built in code): the name
// must be an RFC 9110 token and the value must hold no control character
// but horizontal tab — in particular no CR, LF or NUL, which would let a
// value add header lines of its own on the wire.
func CheckHeader(name, value string) error {
	if !validHeaderName(name) {
		return fmt.Errorf("%w: header name %q is not a token", ErrBadTarget, name)
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return fmt.Errorf("%w: header %s: value %q holds control character %#02x (CR, LF and NUL are never allowed)", ErrBadTarget, name, value, c)
		}
	}
	return nil
}

func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return true
}

// ParseHeader parses one "Name: value" header flag and checks it with
// CheckHeader.
func ParseHeader(s string) (name, value string, err error) {
	name, value, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if !ok {
		return "", "", fmt.Errorf("%w: header %q is not Name: value", ErrBadTarget, s)
	}
	value = strings.Trim(value, " \t")
	if err := CheckHeader(name, value); err != nil {
		return "", "", err
	}
	return name, value, nil
}

// ParseTargets reads a target file. Two forms are accepted:
//
//   - JSON: an array of {"method","url","headers":{"Name":["v"]},"body","weight"}
//     (body is base64, as encoding/json writes []byte);
//   - lines: one target a line, "[METHOD] URL [weight=N]"; blank lines and
//     lines starting with # are skipped. Method, headers and body then come
//     from the defaults passed in.
//
// Every target is checked with CheckTarget; an empty file is an error.
func ParseTargets(data []byte, defaults Target) ([]Target, error) {
	trimmed := bytes.TrimSpace(data)
	var ts []Target
	if len(trimmed) > 0 && trimmed[0] == '[' {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ts); err != nil {
			return nil, fmt.Errorf("%w: target file: %v", ErrBadTarget, err)
		}
		if dec.More() {
			return nil, fmt.Errorf("%w: target file: trailing data after the JSON array", ErrBadTarget)
		}
		for i := range ts {
			if ts[i].Method == "" {
				ts[i].Method = defaults.Method
			}
		}
	} else {
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 0, 4096), 1<<20)
		line := 0
		for sc.Scan() {
			line++
			s := strings.TrimSpace(sc.Text())
			if s == "" || s[0] == '#' {
				continue
			}
			f := strings.Fields(s)
			t := Target{Method: defaults.Method, Header: defaults.Header, Body: defaults.Body}
			if len(f) > 1 && !strings.Contains(f[0], "://") {
				t.Method, f = f[0], f[1:]
			}
			t.URL, f = f[0], f[1:]
			for _, x := range f {
				w, ok := strings.CutPrefix(x, "weight=")
				n, err := strconv.Atoi(w)
				if !ok || err != nil {
					return nil, fmt.Errorf("%w: target file line %d: unexpected %q", ErrBadTarget, line, x)
				}
				t.Weight = n
			}
			ts = append(ts, t)
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%w: target file: %v", ErrBadTarget, err)
		}
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("%w: target file has no targets", ErrBadTarget)
	}
	for i := range ts {
		t, err := CheckTarget(ts[i])
		if err != nil {
			return nil, err
		}
		ts[i] = t
	}
	return ts, nil
}

// picker chooses the next target index. It is not safe for concurrent use;
// the pacer (open loop) owns one, and each closed-loop worker its own.
type picker struct {
	mode    Pick
	weights []int
	total   int
	next    int   // round robin: position in order
	order   []int // round robin: target indices
	current []int // smooth weighted round robin state
}

func newPicker(mode Pick, ts []Target, offset int) *picker {
	p := &picker{mode: mode}
	for i, t := range ts {
		w := max(t.Weight, 1)
		p.weights = append(p.weights, w)
		p.total += w
		p.order = append(p.order, i)
	}
	p.current = make([]int, len(ts))
	if len(p.order) > 0 {
		p.next = offset % len(p.order)
	}
	return p
}

func (p *picker) pick() int {
	if len(p.weights) == 1 {
		return 0
	}
	if p.mode == Weighted {
		best := 0
		for i, w := range p.weights {
			p.current[i] += w
			if p.current[i] > p.current[best] {
				best = i
			}
		}
		p.current[best] -= p.total
		return best
	}
	i := p.order[p.next]
	p.next++
	if p.next == len(p.order) {
		p.next = 0
	}
	return i
}
