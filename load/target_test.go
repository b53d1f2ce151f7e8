package load

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"
)

func TestParseTargetsLines(t *testing.T) {
	data := []byte("# comment\n\nhttp://127.0.0.1:1/a\nPOST http://127.0.0.1:1/b weight=3\n")
	ts, err := ParseTargets(data, Target{Method: "GET", Body: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 {
		t.Fatalf("got %d targets", len(ts))
	}
	if ts[0].Method != "GET" || ts[0].URL != "http://127.0.0.1:1/a" || ts[0].Weight != 1 || string(ts[0].Body) != "x" {
		t.Errorf("target 0 = %+v", ts[0])
	}
	if ts[1].Method != "POST" || ts[1].Weight != 3 {
		t.Errorf("target 1 = %+v", ts[1])
	}
}

func TestParseTargetsJSON(t *testing.T) {
	data := []byte(`[{"url":"http://127.0.0.1:1/a","headers":{"X-A":["1"]},"weight":2},{"method":"PUT","url":"https://h/b","body":"aGk="}]`)
	ts, err := ParseTargets(data, Target{Method: "GET"})
	if err != nil {
		t.Fatal(err)
	}
	if ts[0].Method != "GET" || ts[0].Header.Get("X-A") != "1" || ts[0].Weight != 2 {
		t.Errorf("target 0 = %+v", ts[0])
	}
	if ts[1].Method != "PUT" || string(ts[1].Body) != "hi" {
		t.Errorf("target 1 = %+v", ts[1])
	}
}

func TestParseTargetsErrors(t *testing.T) {
	for name, data := range map[string]string{
		"empty":          "",
		"only comments":  "# nothing\n",
		"bad scheme":     "ftp://x/y\n",
		"no host":        "http:///path\n",
		"bad weight":     "http://h/ weight=x\n",
		"junk field":     "http://h/ junk\n",
		"negative":       "http://h/ weight=-1\n",
		"bad json":       `[{"url":`,
		"unknown field":  `[{"url":"http://h/","nope":1}]`,
		"trailing json":  `[{"url":"http://h/"}] [1]`,
		"lower method":   "get http://h/\n",
		"bad port":       "http://h:99999/\n",
		"bad header key": `[{"url":"http://h/","headers":{"a b":["1"]}}]`,
	} {
		if _, err := ParseTargets([]byte(data), Target{Method: "GET"}); !errors.Is(err, ErrBadTarget) {
			t.Errorf("%s: err = %v, want ErrBadTarget", name, err)
		}
	}
}

func TestParseHeader(t *testing.T) {
	k, v, err := ParseHeader("X-Thing:  a b ")
	if err != nil || k != "X-Thing" || v != "a b" {
		t.Errorf("got %q %q %v", k, v, err)
	}
	for _, bad := range []string{"nocolon", ": v", "a b: v", "X: a\nb"} {
		if _, _, err := ParseHeader(bad); err == nil {
			t.Errorf("ParseHeader(%q) accepted", bad)
		}
	}
}

func TestPickers(t *testing.T) {
	ts := []Target{{URL: "a", Weight: 3}, {URL: "b", Weight: 1}}
	rr := newPicker(RoundRobin, ts, 0)
	got := ""
	for range 4 {
		got += ts[rr.pick()].URL
	}
	if got != "abab" {
		t.Errorf("round robin order %q, want abab (weights ignored)", got)
	}
	w := newPicker(Weighted, ts, 0)
	n := map[string]int{}
	seq := ""
	for range 8 {
		u := ts[w.pick()].URL
		n[u]++
		seq += u
	}
	if n["a"] != 6 || n["b"] != 2 {
		t.Errorf("weighted counts %v over 8 picks, want a:6 b:2", n)
	}
	if seq != "aabaaaba" {
		t.Errorf("weighted order %q, want smooth aabaaaba", seq)
	}
	one := newPicker(Weighted, ts[:1], 0)
	if one.pick() != 0 {
		t.Error("single target")
	}
}

func TestCheckTargetDefaults(t *testing.T) {
	tg, err := CheckTarget(Target{URL: "http://127.0.0.1:8080/x", Header: http.Header{"A": {"b"}}})
	if err != nil || tg.Method != "GET" || tg.Weight != 1 {
		t.Fatalf("%+v %v", tg, err)
	}
}

// TestHeaderValuesValidatedFromEverySource: a value that would put a second
// header line on the wire is refused the same way from a --header flag, a
// JSON targets file, a line targets file's defaults and a Config built in
// code.
func TestHeaderValuesValidatedFromEverySource(t *testing.T) {
	for _, v := range []string{"a\r\nInjected: yes", "a\nb", "a\rb", "a\x00b", "a\x7fb"} {
		if _, _, err := ParseHeader("X-A: " + v); !errors.Is(err, ErrBadTarget) {
			t.Errorf("--header value %q: err %v", v, err)
		}
		js, _ := json.Marshal([]map[string]any{{"url": "http://h/", "headers": map[string][]string{"X-A": {v}}}})
		if _, err := ParseTargets(js, Target{}); !errors.Is(err, ErrBadTarget) {
			t.Errorf("targets JSON value %q: err %v", v, err)
		}
		if _, err := ParseTargets([]byte("http://h/\n"), Target{Header: http.Header{"X-A": {v}}}); !errors.Is(err, ErrBadTarget) {
			t.Errorf("line targets with default header %q: err %v", v, err)
		}
		_, _, err := RunStep(context.Background(), Config{Targets: []Target{{URL: "http://127.0.0.1:1/", Header: http.Header{"X-A": {v}}}}, Concurrency: 1, Duration: time.Millisecond})
		if !errors.Is(err, ErrBadTarget) {
			t.Errorf("Config target value %q: err %v", v, err)
		}
	}
	for _, n := range []string{"X A", "X:A", "", "X\r\nY"} {
		if err := CheckHeader(n, "v"); !errors.Is(err, ErrBadTarget) {
			t.Errorf("name %q accepted", n)
		}
	}
	for _, ok := range [][2]string{{"X-A", "plain"}, {"X-A", "tab\tok"}, {"X-A", ""}, {"X-A", "ünïcode"}} {
		if err := CheckHeader(ok[0], ok[1]); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
}

// TestTargetWeightBounded: a weight past MaxWeight is refused, so the
// weighted picker's sums cannot overflow.
func TestTargetWeightBounded(t *testing.T) {
	if _, err := ParseTargets([]byte("http://h/ weight=9999999999\n"), Target{}); !errors.Is(err, ErrBadTarget) {
		t.Errorf("huge weight: %v", err)
	}
}
