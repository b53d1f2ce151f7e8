package ratelimit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A configuration in the reference server's format, with every kind of
// descriptor it supports.
const referenceYAML = `
domain: test-domain
descriptors:
  - key: wild
    value: foo*
    rate_limit:
      unit: minute
      requests_per_unit: 20
  - key: noWild
    value: foo
    rate_limit:
      unit: minute
      requests_per_unit: 21
  - key: noVal
    rate_limit:
      unit: Minute
      requests_per_unit: 22
  - key: midWild
    value: bar*b
    rate_limit:
      unit: minute
      requests_per_unit: 23
  - key: nestedWild
    value: val1
    descriptors:
      - key: wild
        value: goo*
        rate_limit:
          unit: minute
          requests_per_unit: 24
  - key: key1
    value: value1
    rate_limit:
      unit: second
      requests_per_unit: 5
    descriptors:
      - key: subkey1
        rate_limit:
          unit: hour
          requests_per_unit: 6
      - key: subkey1
        value: subvalue1
        shadow_mode: true
        rate_limit:
          unit: day
          requests_per_unit: 7
  - key: unl
    rate_limit:
      unlimited: true
  - key: files
    value: files/*
    share_threshold: true
    detailed_metric: true
    rate_limit:
      unit: minute
      requests_per_unit: 100
`

func TestLookupFollowsTheReferenceRules(t *testing.T) {
	tb := mustParse(t, referenceYAML)
	for _, tc := range []struct {
		entries []string
		want    uint32 // requests_per_unit of the matched rule; 0: none
		shadow  bool
	}{
		{[]string{"wild", "foo"}, 20, false},
		{[]string{"wild", "foobar"}, 20, false},
		{[]string{"wild", "fo"}, 0, false},
		{[]string{"noWild", "foo"}, 21, false},
		{[]string{"noWild", "foobar"}, 0, false},
		{[]string{"noVal", "anything"}, 22, false},
		{[]string{"noVal", ""}, 22, false},
		{[]string{"midWild", "barab"}, 0, false}, // '*' only counts at the end
		{[]string{"midWild", "bar*b"}, 23, false},
		{[]string{"nestedWild", "val1", "wild", "goose"}, 24, false},
		{[]string{"nestedWild", "val1"}, 0, false}, // no rule at that depth
		{[]string{"key1", "value1"}, 5, false},
		{[]string{"key1", "value1", "subkey1", "x"}, 6, false},
		{[]string{"key1", "value1", "subkey1", "subvalue1"}, 7, true},
		{[]string{"key1", "value1", "subkey1", "x", "deeper", "y"}, 0, false},
		{[]string{"key1", "value2"}, 0, false},
		{[]string{"nope", "x"}, 0, false},
	} {
		var es []Entry
		for i := 0; i < len(tc.entries); i += 2 {
			es = append(es, Entry{tc.entries[i], tc.entries[i+1]})
		}
		m, ok := tb.Lookup("test-domain", es)
		got := uint32(0)
		if ok {
			got = m.Rule.RequestsPerUnit
		}
		if got != tc.want || ok && m.Rule.ShadowMode != tc.shadow {
			t.Errorf("%v: matched %d (shadow %v), want %d (shadow %v)", tc.entries, got, ok && m.Rule.ShadowMode, tc.want, tc.shadow)
		}
	}
	if _, ok := tb.Lookup("other-domain", []Entry{{"wild", "foo"}}); ok {
		t.Error("a descriptor of another domain matched")
	}
	m, ok := tb.Lookup("test-domain", []Entry{{"unl", "x"}})
	if !ok || !m.Rule.Unlimited {
		t.Errorf("unlimited rule: %+v %v", m.Rule, ok)
	}
	m, _ = tb.Lookup("test-domain", []Entry{{"files", "files/a.txt"}})
	if len(m.shared) != 1 || m.shared[0] != "files/*" {
		t.Errorf("share_threshold: counter shared under %q, want files/*", m.shared)
	}
}

func TestParseRefusesWhatTheReferenceRefuses(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"empty", ``, "empty"},
		{"no domain", "descriptors: []", "domain is empty"},
		{"bad yaml", "domain: [", "yaml"},
		{"unknown key", "domain: d\ndescriptors:\n  - key: a\n    ratelimit: {}\n", `test.yaml:4: unknown key "ratelimit"`},
		{"misspelled nested", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      request_per_unit: 5\n", `unknown key "request_per_unit"`},
		{"empty key", "domain: d\ndescriptors:\n  - value: a\n", "empty key"},
		{"duplicate", "domain: d\ndescriptors:\n  - key: a\n  - key: a\n", "configured twice"},
		{"bad unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n", `invalid rate limit unit "fortnight"`},
		{"unlimited with unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unlimited: true, unit: second}\n", "must not have a unit"},
		{"non-map list", "domain: d\ndescriptors:\n  - a\n", "only mappings"},
		{"non-string key", "domain: d\n1: x\n", "must be a string"},
		{"float", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1.5}\n", "1.5"},
		{"replaces self", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, name: x, replaces: [{name: x}]}\n", "itself"},
		{"replaces empty", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{name: ''}]}\n", "empty name"},
		{"share without wildcard", "domain: d\ndescriptors:\n  - key: a\n    value: b\n    share_threshold: true\n", "wildcard"},
		{"negative", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: -1}\n", "from 0 to"},
		{"bad algorithm", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: leaky}\n", "want gcra or fixed_window"},
		{"bad fail", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, fail: maybe}\n", "want open or closed"},
		{"burst on fixed window", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, burst: 5, algorithm: fixed_window}\n", "gcra only"},
	} {
		_, err := Parse("test.yaml", []byte(tc.yaml))
		if err == nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestSluiceKeysAreOptional(t *testing.T) {
	tb := mustParse(t, `
domain: d
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 10, burst: 30, algorithm: gcra, fail: closed}
  - key: b
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: fixed_window}
`)
	a, _ := tb.Lookup("d", []Entry{{"a", "1"}})
	if a.Rule.Burst != 30 || a.Rule.Algorithm != GCRA || a.Rule.Fail != FailClosed {
		t.Errorf("rule a: %+v", a.Rule)
	}
	b, _ := tb.Lookup("d", []Entry{{"b", "1"}})
	if b.Rule.Algorithm != FixedWindow || b.Rule.Fail != FailDefault || b.Rule.Burst != 0 {
		t.Errorf("rule b: %+v", b.Rule)
	}
}

func TestLoadDirectoryAndDomains(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", "domain: one\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	write("b.yml", "domain: two\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 2}\n")
	write("notes.txt", "not yaml")
	tb, err := Load([]string{dir}, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(tb.Domains(), ","); got != "one,two" {
		t.Errorf("domains %q", got)
	}
	write("c.yaml", "domain: one\ndescriptors:\n  - key: j\n    rate_limit: {unit: second, requests_per_unit: 3}\n")
	if _, err := Load([]string{dir}, false); err == nil || !strings.Contains(err.Error(), "configured twice") {
		t.Errorf("duplicate domain across files: %v", err)
	}
	tb, err = Load([]string{dir}, true)
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := tb.Lookup("one", []Entry{{"j", "x"}}); !ok || m.Rule.RequestsPerUnit != 3 {
		t.Errorf("merged domain: %v %v", m.Rule, ok)
	}
	if _, err := Load([]string{filepath.Join(dir, "missing.yaml")}, false); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("missing file: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(referenceYAML))
	f.Add([]byte("domain: d\ndescriptors:\n  - key: a\n    value: b*\n    descriptors:\n      - key: c\n        rate_limit: {unit: day, requests_per_unit: 9}\n"))
	f.Add([]byte("domain: &x d\ndescriptors: *x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tb, err := Parse("fuzz.yaml", data)
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
			}
			return
		}
		for _, r := range tb.Rules() {
			if !r.Unlimited && r.Unit.Seconds() == 0 {
				t.Fatalf("rule %s has no unit", r.Path)
			}
		}
		// Every table builds a service.
		if _, err := New(Config{MaxKeys: 16}, tb); err != nil {
			t.Fatalf("parsed table refused by New: %v", err)
		}
	})
}

func FuzzLookup(f *testing.F) {
	tb := mustParse(f, referenceYAML)
	f.Add("test-domain", "wild", "foo", "", "")
	f.Add("test-domain", "key1", "value1", "subkey1", "subvalue1")
	f.Add("test-domain", "nestedWild", "val1", "wild", "g")
	f.Fuzz(func(t *testing.T, domain, k1, v1, k2, v2 string) {
		es := []Entry{{k1, v1}}
		if k2 != "" {
			es = append(es, Entry{k2, v2})
		}
		m, ok := tb.Lookup(domain, es)
		if ok && (m.Rule == nil || m.Rule.Domain != domain) {
			t.Fatalf("match %+v for domain %q", m.Rule, domain)
		}
		if ok && len(m.shared) > len(es) {
			t.Fatal("more shared patterns than entries")
		}
		d := desc(k1, v1)
		if k2 != "" {
			d = desc(k1, v1, k2, v2)
		}
		if k := counterKey(d, m.shared); k == "" {
			t.Fatal("empty counter key")
		}
	})
}
