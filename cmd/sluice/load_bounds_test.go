package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadSizeBoundsExitTwoBeforeAllocating feeds every size flag a value
// past its bound. Each must be refused with exit 2, a message naming the flag
// and its bound, and no report; none may panic or run out of memory (the
// values here would ask for gigabytes if they reached an allocation).
func TestLoadSizeBoundsExitTwoBeforeAllocating(t *testing.T) {
	srv := okServer(t, 0)
	dir := t.TempDir()
	out := filepath.Join(dir, "r.json")
	cases := []struct {
		name string
		args []string
		msg  string
	}{
		{"huge rate", []string{"load", "--url", srv.URL, "--rate", "1e10"}, "--rate"},
		{"rate overflows", []string{"load", "--url", srv.URL, "--rate", "1e308"}, "--rate"},
		{"infinite rate", []string{"load", "--url", srv.URL, "--rate", "+Inf"}, "--rate"},
		{"huge ramp", []string{"load", "--url", srv.URL, "--rate", "10", "--ramp-to", "1e12"}, "--ramp-to"},
		{"huge step", []string{"load", "--url", srv.URL, "--steps", "10,1e12"}, "--steps"},
		{"huge queue", []string{"load", "--url", srv.URL, "--rate", "10", "--queue-depth", "99999999999999"}, "--queue-depth"},
		{"huge budget", []string{"load", "--url", srv.URL, "--rate", "10", "--p99-budget", "1000h"}, "--p99-budget"},
		{"budget times rate", []string{"load", "--url", srv.URL, "--rate", "100000", "--p99-budget", "5m"}, "--queue-depth"},
		{"huge workers", []string{"load", "--url", srv.URL, "--rate", "10", "--workers", "100000000"}, "--workers"},
		{"huge concurrency", []string{"load", "--url", srv.URL, "--concurrency", "10000000"}, "--concurrency"},
		{"huge windows", []string{"load", "--url", srv.URL, "--rate", "10", "--windows", "100000000"}, "--windows"},
		{"huge duration", []string{"load", "--url", srv.URL, "--rate", "10", "--duration", "100000h"}, "--duration"},
		{"sweep huge rung", []string{"sweep", "--url", srv.URL, "--concurrencies", "4,100000000"}, "--concurrencies"},
		{"sweep huge rate", []string{"sweep", "--url", srv.URL, "--rates", "1e300"}, "--rates"},
		{"negative drain timeout", []string{"load", "--url", srv.URL, "--rate", "10", "--drain-timeout", "-1s"}, "--drain-timeout"},
		{"live not a bool", []string{"load", "--url", srv.URL, "--rate", "10", "--live", "maybe"}, "--live"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{c.args[0], "--out", out, "--live=off"}, c.args[1:]...)
			if c.name == "live not a bool" {
				args = append([]string{c.args[0], "--out", out}, c.args[1:]...)
			}
			if c.args[0] == "load" && c.name != "huge duration" {
				args = append(args, "--duration", "100ms")
			}
			code, _, stderr := runCmd(context.Background(), nil, args...)
			if code != exitUsage {
				t.Errorf("exit %d, want 2; stderr %q", code, stderr)
			}
			if !strings.Contains(stderr, c.msg) {
				t.Errorf("stderr %q does not name %s", stderr, c.msg)
			}
			if c.name == "negative drain timeout" && strings.Contains(stderr, "--p99-budget") {
				t.Errorf("stderr %q names flags that were fine", stderr)
			}
			if strings.Contains(c.name, "huge") && !strings.Contains(stderr, "at most") {
				t.Errorf("stderr %q does not state the bound", stderr)
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("a report was written for bad input")
			}
		})
	}
}

// TestLiveFlagIsStrict: --live takes auto or a boolean, nothing else.
func TestLiveFlagIsStrict(t *testing.T) {
	for _, ok := range []string{"auto", "on", "off", "true", "false", "1", "0"} {
		var l liveFlag
		if err := l.Set(ok); err != nil {
			t.Errorf("--live %s refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"maybe", "", "yes please", "2"} {
		var l liveFlag
		if err := l.Set(bad); err == nil {
			t.Errorf("--live %q accepted", bad)
		}
	}
}

// TestTargetsFileCannotInjectHeaders: the targets file goes through the
// same header check as --header.
func TestTargetsFileCannotInjectHeaders(t *testing.T) {
	srv := okServer(t, 0)
	dir := t.TempDir()
	out := filepath.Join(dir, "r.json")
	tf := writeFile(t, dir, "t.json", `[{"url":"`+srv.URL+`/","headers":{"X-A":["a\r\nInjected: yes"]}}]`)
	for _, args := range [][]string{
		{"load", "--targets", tf, "--rate", "10"},
		{"load", "--url", srv.URL, "--rate", "10", "--header", "X-A: a\r\nInjected: yes"},
		{"load", "--url", srv.URL, "--rate", "10", "--header", "X-A: a\x00b"},
	} {
		code, _, stderr := runCmd(context.Background(), nil, append(args, "--out", out, "--duration", "100ms")...)
		if code != exitUsage || !strings.Contains(stderr, "control character") {
			t.Errorf("%q: exit %d, stderr %q; want 2 naming the control character", args, code, stderr)
		}
		if _, err := os.Stat(out); err == nil {
			t.Error("a report was written")
		}
	}
}
