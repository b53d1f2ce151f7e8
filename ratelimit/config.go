package ratelimit

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// ErrInvalidConfig is wrapped by every error Parse, Load and New return
// for a bad configuration file or Config.
var ErrInvalidConfig = errors.New("ratelimit: invalid config")

// Algorithm is how a rule counts hits.
type Algorithm uint8

const (
	// AlgorithmDefault (the zero value) means the server's default:
	// Config.Algorithm, itself GCRA when zero.
	AlgorithmDefault Algorithm = iota
	// GCRA is a token bucket of Burst tokens refilled at
	// requests_per_unit per unit, on Redis's clock in fleet mode: no
	// window edge at which twice the limit passes.
	GCRA
	// FixedWindow counts hits in windows aligned to the epoch, like the
	// reference server: the same codes and limit_remaining.
	FixedWindow
)

// String returns "default", "gcra" or "fixed_window".
func (a Algorithm) String() string {
	switch a {
	case GCRA:
		return "gcra"
	case FixedWindow:
		return "fixed_window"
	}
	return "default"
}

// ParseAlgorithm parses "gcra" or "fixed_window".
func ParseAlgorithm(s string) (Algorithm, error) {
	switch s {
	case "gcra":
		return GCRA, nil
	case "fixed_window":
		return FixedWindow, nil
	}
	return 0, fmt.Errorf("algorithm %q: want gcra or fixed_window", s)
}

// FailPolicy is what a rule answers while its store (Redis) is slow or
// down.
type FailPolicy uint8

const (
	// FailDefault (the zero value) means the server's default,
	// Config.Fail, itself FailOpen when zero.
	FailDefault FailPolicy = iota
	// FailOpen decides alone with this instance's share of the limit
	// (the limit divided by Config.Instances).
	FailOpen
	// FailClosed answers OVER_LIMIT: nothing passes that the fleet did
	// not count.
	FailClosed
)

// String returns "default", "open" or "closed".
func (f FailPolicy) String() string {
	switch f {
	case FailOpen:
		return "open"
	case FailClosed:
		return "closed"
	}
	return "default"
}

// ParseFailPolicy parses "open" or "closed".
func ParseFailPolicy(s string) (FailPolicy, error) {
	switch s {
	case "open":
		return FailOpen, nil
	case "closed":
		return FailClosed, nil
	}
	return 0, fmt.Errorf("fail %q: want open or closed", s)
}

// Unit is a rate limit's unit of time, as the RLS protocol names them.
type Unit uint8

// Units, numbered as envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit.
const (
	UnitUnknown Unit = iota
	UnitSecond
	UnitMinute
	UnitHour
	UnitDay
	UnitMonth
	UnitYear
	UnitWeek
)

var unitNames = map[string]Unit{
	"SECOND": UnitSecond, "MINUTE": UnitMinute, "HOUR": UnitHour, "DAY": UnitDay,
	"MONTH": UnitMonth, "YEAR": UnitYear, "WEEK": UnitWeek,
}

// Seconds is the unit's length as the reference server counts it: a
// month is 30 days and a year 365.
func (u Unit) Seconds() int64 {
	switch u {
	case UnitSecond:
		return 1
	case UnitMinute:
		return 60
	case UnitHour:
		return 3600
	case UnitDay:
		return 86400
	case UnitWeek:
		return 7 * 86400
	case UnitMonth:
		return 30 * 86400
	case UnitYear:
		return 365 * 86400
	}
	return 0
}

// Duration is Seconds as a time.Duration.
func (u Unit) Duration() time.Duration { return time.Duration(u.Seconds()) * time.Second }

// String returns the unit's protocol name, e.g. "MINUTE".
func (u Unit) String() string {
	for name, v := range unitNames {
		if v == u {
			return name
		}
	}
	return "UNKNOWN"
}

// Rule is one configured limit: the rate_limit of a descriptor in a
// configuration file, or a limit a request carries itself.
type Rule struct {
	// Domain is the configuration's domain; Path is the descriptor's full
	// key in the reference server's notation ("domain.key_value.key"),
	// used in logs, /state and the RateLimit headers (never in metric
	// labels).
	Domain, Path string
	// Name and Replaces are rate_limit.name and rate_limit.replaces: a
	// rule that names another in Replaces turns it off for a request that
	// matches both.
	Name     string
	Replaces []string
	// RequestsPerUnit per Unit is the limit.
	RequestsPerUnit uint32
	Unit            Unit
	// Unlimited rules answer OK without counting.
	Unlimited bool
	// ShadowMode rules count and report, but always answer OK.
	ShadowMode bool
	// QuotaMode rules answer OK when over the limit, as the reference
	// server does (the violation is only reported).
	QuotaMode bool
	// ShareThreshold makes every value that matches a wildcard share one
	// counter (the pattern's), instead of one counter per value.
	ShareThreshold bool
	// sluice's additions. Burst is the GCRA bucket size (0:
	// RequestsPerUnit); Algorithm and Fail override the server's
	// defaults.
	Burst     int
	Algorithm Algorithm
	Fail      FailPolicy
	// Line is where the rule is in its file (0 for a request's own limit).
	File string
	Line int
}

// key identifies a rule's counters: two rules with the same key share
// counters across reloads, so a reload does not forgive anything.
func (r *Rule) key() string {
	return r.Domain + "\x00" + r.Path
}

// params is everything that changes how a rule's counters decide; a rule
// reloaded with other params gets a new limiter.
func (r *Rule) params(alg Algorithm, fail FailPolicy) string {
	return fmt.Sprintf("%d/%d/%d/%s/%s", r.RequestsPerUnit, r.Unit, r.Burst, alg, fail)
}

// matchKey is a child's key in the descriptor tree: an entry's key, with
// its value or without one (key-only: any value).
type matchKey struct {
	key, value string
	hasValue   bool
}

type node struct {
	rule     *Rule
	children map[matchKey]*node
	// wildcards are the children whose value ends in '*', in file order.
	wildcards []wildcard
	// shareThreshold and pattern: this node was configured with
	// share_threshold on a wildcard value; pattern is the value with its
	// '*' ("files/*").
	shareThreshold bool
	pattern        string
}

type wildcard struct {
	key, prefix string
	n           *node
}

// Table is a loaded configuration: the descriptor trees of every domain.
// It is immutable once loaded and safe for concurrent use.
type Table struct {
	domains map[string]*node
	rules   []*Rule
	// Files are the files it was loaded from.
	Files []string
	// Warnings are keys the reference server accepts but ignores where
	// they were written (a `unit` outside a rate_limit, say).
	Warnings []string
}

// Rules returns every configured rule, in file order.
func (t *Table) Rules() []*Rule { return t.rules }

// Domains returns the configured domains, sorted.
func (t *Table) Domains() []string {
	ds := make([]string, 0, len(t.domains))
	for d := range t.domains {
		ds = append(ds, d)
	}
	slices.Sort(ds)
	return ds
}

// HasDomain reports whether domain is configured.
func (t *Table) HasDomain(domain string) bool {
	_, ok := t.domains[domain]
	return ok
}

// Entry is one key/value pair of a request's descriptor.
type Entry struct{ Key, Value string }

// Match is the rule a descriptor matched and the counter key it spends:
// its entries, with a share_threshold entry's value replaced by the
// wildcard pattern.
type Match struct {
	Rule *Rule
	// shared[i] is the pattern entry i counts under, or "".
	shared []string
}

// Lookup finds the rule for a descriptor of domain, with the reference
// server's rules: at each level an entry matches a child with the same
// key and value first, then a wildcard child (a value ending in '*')
// whose prefix the value starts with, then a key-only child. The rule
// applies only if it sits at the descriptor's last entry: a descriptor
// deeper or shallower than the configuration matches nothing.
func (t *Table) Lookup(domain string, entries []Entry) (Match, bool) {
	n := t.domains[domain]
	if n == nil || len(entries) == 0 {
		return Match{}, false
	}
	var shared []string
	for i, e := range entries {
		next := n.children[matchKey{e.Key, e.Value, true}]
		if next == nil {
			for _, w := range n.wildcards {
				if w.key == e.Key && strings.HasPrefix(e.Value, w.prefix) {
					next = w.n
					if next.shareThreshold {
						if shared == nil {
							shared = make([]string, len(entries))
						}
						shared[i] = next.pattern
					}
					break
				}
			}
		}
		if next == nil {
			next = n.children[matchKey{key: e.Key}]
		}
		if next == nil {
			return Match{}, false
		}
		if i == len(entries)-1 {
			if next.rule == nil {
				return Match{}, false
			}
			return Match{Rule: next.rule, shared: shared}, true
		}
		if len(next.children) == 0 {
			return Match{}, false
		}
		n = next
	}
	return Match{}, false
}

// Load reads every file in paths (a directory stands for the *.yaml and
// *.yml files in it, sorted) and builds one Table. Each file holds one
// domain; a domain in two files is an error unless merge is true, in
// which case their descriptors are combined (a descriptor in both is
// still an error).
func Load(paths []string, merge bool) (*Table, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		ents, err := os.ReadDir(p)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
		}
		for _, e := range ents {
			if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".yaml" || ext == ".yml") && !strings.HasPrefix(e.Name(), ".") {
				files = append(files, filepath.Join(p, e.Name()))
			}
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: no configuration files in %s", ErrInvalidConfig, strings.Join(paths, ", "))
	}
	t := newTable()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
		}
		if err := t.add(f, data, merge); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// Parse builds a Table from one file's contents; name labels errors.
func Parse(name string, data []byte) (*Table, error) {
	t := newTable()
	if err := t.add(name, data, false); err != nil {
		return nil, err
	}
	return t, nil
}

func newTable() *Table { return &Table{domains: map[string]*node{}} }

// The keys the reference server accepts, at any level.
var referenceKeys = map[string]bool{
	"domain": true, "key": true, "value": true, "descriptors": true, "rate_limit": true, "unit": true,
	"requests_per_unit": true, "unlimited": true, "shadow_mode": true, "quota_mode": true, "name": true,
	"replaces": true, "detailed_metric": true, "value_to_metric": true, "share_threshold": true,
}

// sluice's optional keys, inside rate_limit.
var sluiceKeys = map[string]bool{"burst": true, "algorithm": true, "fail": true}

// maxDepth bounds descriptor nesting, so a hostile file cannot exhaust
// the stack.
const maxDepth = 64

type parser struct {
	file string
	t    *Table
}

func (p *parser) errf(n *yaml.Node, format string, args ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return fmt.Errorf("%w: %s:%d: %s", ErrInvalidConfig, p.file, line, fmt.Sprintf(format, args...))
}

func (p *parser) warnf(n *yaml.Node, format string, args ...any) {
	p.t.Warnings = append(p.t.Warnings, fmt.Sprintf("%s:%d: %s", p.file, n.Line, fmt.Sprintf(format, args...)))
}

func (t *Table) add(file string, data []byte, merge bool) error {
	p := &parser{file: file, t: t}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalidConfig, file, err)
	}
	var root *yaml.Node
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		root = doc.Content[0]
	}
	if root == nil || root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return p.errf(&doc, "the file is empty: want a domain and descriptors")
	}
	if root.Kind != yaml.MappingNode {
		return p.errf(root, "want a mapping with domain and descriptors")
	}
	if err := p.checkKeys(root, 0); err != nil {
		return err
	}
	var domain string
	var descs *yaml.Node
	for i := 0; i < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch k.Value {
		case "domain":
			s, err := p.str(v, "domain")
			if err != nil {
				return err
			}
			domain = s
		case "descriptors":
			descs = v
		default:
			p.warnf(k, "%q is ignored at the top level", k.Value)
		}
	}
	if domain == "" {
		return p.errf(root, "the domain is empty: every file needs domain: NAME")
	}
	n := t.domains[domain]
	if n != nil && !merge {
		return p.errf(root, "domain %q is configured twice (in another file)", domain)
	}
	if n == nil {
		n = &node{children: map[matchKey]*node{}}
		t.domains[domain] = n
	}
	t.Files = append(t.Files, file)
	return p.descriptors(n, domain, domain+".", descs, 1)
}

// checkKeys rejects what the reference server rejects: keys that are not
// strings or not among its keys (sluice's own keys are allowed inside
// rate_limit), lists of anything but mappings, and leaf values other
// than strings, integers, booleans and null.
func (p *parser) checkKeys(m *yaml.Node, depth int) error {
	if depth > 3*maxDepth {
		return p.errf(m, "nested more than %d levels deep", maxDepth)
	}
	for i := 0; i < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
			return p.errf(k, "a key must be a string")
		}
		if !referenceKeys[k.Value] && !sluiceKeys[k.Value] {
			return p.errf(k, "unknown key %q", k.Value)
		}
		if err := p.checkValue(v, depth); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) checkValue(v *yaml.Node, depth int) error {
	if v.Kind == yaml.AliasNode {
		return p.errf(v, "aliases are not supported")
	}
	switch v.Kind {
	case yaml.SequenceNode:
		for _, e := range v.Content {
			if e.Kind != yaml.MappingNode {
				return p.errf(e, "a list may hold only mappings")
			}
			if err := p.checkKeys(e, depth+1); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		return p.checkKeys(v, depth+1)
	case yaml.ScalarNode:
		switch v.Tag {
		case "!!str", "!!int", "!!bool", "!!null":
		default:
			return p.errf(v, "value %q: want a string, a whole number or a boolean", v.Value)
		}
	}
	return nil
}

func (p *parser) descriptors(parent *node, domain, prefix string, seq *yaml.Node, depth int) error {
	if seq == nil || seq.Kind == yaml.ScalarNode && seq.Tag == "!!null" {
		return nil
	}
	if seq.Kind != yaml.SequenceNode {
		return p.errf(seq, "descriptors: want a list")
	}
	if depth > maxDepth {
		return p.errf(seq, "descriptors nested more than %d levels deep", maxDepth)
	}
	for _, d := range seq.Content {
		if err := p.descriptor(parent, domain, prefix, d, depth); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) descriptor(parent *node, domain, prefix string, d *yaml.Node, depth int) error {
	var key, value string
	var hasValue bool
	var rl, children *yaml.Node
	var shadow, quotaMode, share bool
	for i := 0; i < len(d.Content); i += 2 {
		k, v := d.Content[i], d.Content[i+1]
		var err error
		switch k.Value {
		case "key":
			key, err = p.str(v, "key")
		case "value":
			value, err = p.str(v, "value")
			hasValue = value != ""
		case "rate_limit":
			if v.Kind != yaml.MappingNode {
				return p.errf(v, "rate_limit: want a mapping")
			}
			rl = v
		case "descriptors":
			children = v
		case "shadow_mode":
			shadow, err = p.boolean(v, "shadow_mode")
		case "quota_mode":
			quotaMode, err = p.boolean(v, "quota_mode")
		case "share_threshold":
			share, err = p.boolean(v, "share_threshold")
		case "detailed_metric", "value_to_metric":
			// Metric naming of the reference server's statsd output;
			// sluice never labels metrics with descriptor values.
			_, err = p.boolean(v, k.Value)
		default:
			p.warnf(k, "%q is ignored in a descriptor", k.Value)
		}
		if err != nil {
			return err
		}
	}
	if key == "" {
		return p.errf(d, "a descriptor has an empty key")
	}
	full := key
	if hasValue {
		full += "_" + value
	}
	path := prefix + full
	mk := matchKey{key, value, hasValue}
	if parent.children[mk] != nil {
		return p.errf(d, "descriptor %q is configured twice", path)
	}
	isWild := hasValue && strings.HasSuffix(value, "*")
	if share && !isWild {
		return p.errf(d, "share_threshold needs a wildcard value (ending in '*'), not %q", full)
	}
	n := &node{children: map[matchKey]*node{}, shareThreshold: share}
	if share {
		n.pattern = value
	}
	if rl != nil {
		r, err := p.rateLimit(rl, domain, path)
		if err != nil {
			return err
		}
		r.ShadowMode, r.QuotaMode, r.ShareThreshold = shadow, quotaMode, share
		r.Line = d.Line
		n.rule = r
		p.t.rules = append(p.t.rules, r)
	}
	parent.children[mk] = n
	if isWild {
		parent.wildcards = append(parent.wildcards, wildcard{key: key, prefix: strings.TrimSuffix(value, "*"), n: n})
	}
	return p.descriptors(n, domain, path+".", children, depth+1)
}

func (p *parser) rateLimit(m *yaml.Node, domain, path string) (*Rule, error) {
	r := &Rule{Domain: domain, Path: path, File: p.file}
	var unit string
	var unitNode *yaml.Node
	for i := 0; i < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		var err error
		switch k.Value {
		case "unit":
			unit, err = p.str(v, "unit")
			unitNode = v
		case "requests_per_unit":
			var n int64
			n, err = p.integer(v, "requests_per_unit", 0, math.MaxUint32)
			r.RequestsPerUnit = uint32(n)
		case "unlimited":
			r.Unlimited, err = p.boolean(v, "unlimited")
		case "name":
			r.Name, err = p.str(v, "name")
		case "replaces":
			if v.Kind != yaml.SequenceNode {
				return nil, p.errf(v, "replaces: want a list of {name: NAME}")
			}
			for _, e := range v.Content {
				var name string
				for j := 0; j < len(e.Content); j += 2 {
					if e.Content[j].Value == "name" {
						if name, err = p.str(e.Content[j+1], "replaces name"); err != nil {
							return nil, err
						}
					}
				}
				if name == "" {
					return nil, p.errf(e, "replaces: an entry has an empty name")
				}
				r.Replaces = append(r.Replaces, name)
			}
		case "burst":
			var n int64
			n, err = p.integer(v, "burst", 1, 1_000_000_000)
			r.Burst = int(n)
		case "algorithm":
			var s string
			if s, err = p.str(v, "algorithm"); err == nil {
				if r.Algorithm, err = ParseAlgorithm(s); err != nil {
					return nil, p.errf(v, "%v", err)
				}
			}
		case "fail":
			var s string
			if s, err = p.str(v, "fail"); err == nil {
				if r.Fail, err = ParseFailPolicy(s); err != nil {
					return nil, p.errf(v, "%v", err)
				}
			}
		default:
			p.warnf(k, "%q is ignored in a rate_limit", k.Value)
		}
		if err != nil {
			return nil, err
		}
	}
	u, known := unitNames[strings.ToUpper(unit)]
	switch {
	case r.Unlimited && known:
		return nil, p.errf(unitNode, "%s: an unlimited rate_limit must not have a unit", path)
	case !r.Unlimited && !known:
		return nil, p.errf(orNode(unitNode, m), "%s: invalid rate limit unit %q: want second, minute, hour, day, week, month or year", path, unit)
	}
	r.Unit = u
	for _, name := range r.Replaces {
		if name == r.Name {
			return nil, p.errf(m, "%s: replaces names the rule itself (%q)", path, name)
		}
	}
	if r.Burst > 0 && r.Algorithm == FixedWindow {
		return nil, p.errf(m, "%s: burst applies to algorithm gcra only", path)
	}
	return r, nil
}

func orNode(a, b *yaml.Node) *yaml.Node {
	if a != nil {
		return a
	}
	return b
}

func (p *parser) str(v *yaml.Node, what string) (string, error) {
	if v.Kind != yaml.ScalarNode {
		return "", p.errf(v, "%s: want a string", what)
	}
	if v.Tag == "!!null" {
		return "", nil
	}
	return v.Value, nil
}

func (p *parser) boolean(v *yaml.Node, what string) (bool, error) {
	if v.Kind == yaml.ScalarNode {
		switch strings.ToLower(v.Value) {
		case "true", "yes", "on", "y":
			return true, nil
		case "false", "no", "off", "n", "":
			return false, nil
		}
	}
	return false, p.errf(v, "%s: want true or false, not %q", what, v.Value)
}

func (p *parser) integer(v *yaml.Node, what string, lo, hi int64) (int64, error) {
	if v.Kind != yaml.ScalarNode || v.Tag != "!!int" {
		return 0, p.errf(v, "%s: want a whole number, not %q", what, v.Value)
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(v.Value, "_", ""), 0, 64)
	if err != nil || n < lo || n > hi {
		return 0, p.errf(v, "%s %s: want a whole number from %d to %d", what, v.Value, lo, hi)
	}
	return n, nil
}
