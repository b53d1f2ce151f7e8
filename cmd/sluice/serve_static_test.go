package main

import (
	"bytes"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/internal/demosite"
	"github.com/sluicehq/sluice/static"
)

func staticTestLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// parseStatic registers the static flags on a fresh set and parses args
// (and environment twins) like serve does.
func parseStatic(t *testing.T, args []string, envs map[string]string) (*staticOptions, error) {
	t.Helper()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := addStaticFlags(fs)
	e := env{stdout: io.Discard, stderr: io.Discard, getenv: func(k string) string { return envs[k] }}
	return o, parseFlags(fs, e, args)
}

func TestStaticFlagsDefaults(t *testing.T) {
	o, err := parseStatic(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := o.config(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := static.Config{
		WorkLimit: 16, CacheBytes: static.DefaultCacheBytes, MaxCachedFileSize: static.DefaultMaxCachedFileSize,
		Revalidate: static.DefaultRevalidate, Scope: static.ScopeDisk, FS: demosite.FS(),
	}
	if cfg != want {
		t.Errorf("defaults give %+v, want %+v", cfg, want)
	}
}

func TestStaticFlagsParse(t *testing.T) {
	o, err := parseStatic(t, []string{
		"--max-inflight", "1", "--queue", "8", "--max-wait", "250ms", "--cache-bytes", "8MiB",
		"--max-cached-file-size", "64K", "--revalidate", "0", "--gate-streams=false", "--gate-scope", "request", "--dotfiles",
	}, map[string]string{"SLUICE_ROOT": "/srv/www", "SLUICE_MAX_INFLIGHT": "99"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := o.config(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := static.Config{
		Root: "/srv/www", Dotfiles: true, WorkLimit: 1, Queue: 8, MaxWait: 250 * time.Millisecond,
		CacheBytes: 8 << 20, MaxCachedFileSize: 64 << 10, Revalidate: -1, UngatedStreams: true, Scope: static.ScopeRequest,
	}
	if cfg != want {
		t.Errorf("got %+v\nwant %+v", cfg, want)
	}
	// 0 on the command line turns the cache off.
	o, _ = parseStatic(t, []string{"--cache-bytes", "0", "--max-cached-file-size", "0"}, nil)
	if cfg, _ := o.config(nil); cfg.CacheBytes != -1 || cfg.MaxCachedFileSize != -1 {
		t.Errorf("--cache-bytes 0: %d, %d; want -1, -1 (off)", cfg.CacheBytes, cfg.MaxCachedFileSize)
	}
}

// Bad values are errors from parsing (bad syntax) or from build (bad
// combinations), never a server that starts with something else.
func TestStaticFlagsErrors(t *testing.T) {
	for _, c := range []struct {
		args    []string
		envs    map[string]string
		parse   bool   // fails at parse time
		mention string // the message names this
	}{
		{[]string{"--max-inflight", "0"}, nil, false, "--max-inflight 0: want 1 to"},
		{[]string{"--max-inflight", "-3"}, nil, false, "--max-inflight -3: want 1 to"},
		{[]string{"--max-inflight", "99999999"}, nil, false, "--max-inflight 99999999: want 1 to"},
		{[]string{"--max-inflight", "none"}, nil, true, "max-inflight"},
		{[]string{"--max-inflight", "off", "--queue", "4"}, nil, false, "--max-inflight off"},
		{[]string{"--max-inflight", "off", "--gate-scope", "request"}, nil, false, "--max-inflight off"},
		{[]string{"--queue", "2000000"}, nil, false, "--queue"},
		{[]string{"--max-wait", "1000h", "--queue", "1"}, nil, false, "--max-wait"},
		{[]string{"--revalidate", "100000h"}, nil, false, "--revalidate"},
		{[]string{"--queue", "-1"}, nil, false, "--queue"},
		{[]string{"--max-wait", "-1s"}, nil, false, "--max-wait"},
		{[]string{"--max-wait", "1s"}, nil, false, "--queue"},
		{[]string{"--revalidate", "-1s"}, nil, false, "--revalidate"},
		{[]string{"--gate-scope", "everything"}, nil, false, "--gate-scope"},
		{[]string{"--cache-bytes", "lots"}, nil, true, "cache-bytes"},
		{[]string{"--cache-bytes", "5TB"}, nil, true, "cache-bytes"},
		{[]string{"--gate-streams=maybe"}, nil, true, "gate-streams"},
		{nil, map[string]string{"SLUICE_MAX_CACHED_FILE_SIZE": "-1"}, true, "SLUICE_MAX_CACHED_FILE_SIZE"},
		{[]string{"--root", filepath.Join(t.TempDir(), "missing")}, nil, false, "--root"},
	} {
		o, err := parseStatic(t, c.args, c.envs)
		if c.parse {
			if err == nil || !strings.Contains(err.Error(), c.mention) {
				t.Errorf("%v %v: parse error %v, want one naming %s", c.args, c.envs, err, c.mention)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: unexpected parse error %v", c.args, err)
			continue
		}
		h, gates, _, cleanup, err := o.build(nil, nil, nil)
		if err == nil {
			cleanup()
			t.Errorf("%v: build accepted (handler %v, %d gates)", c.args, h != nil, len(gates))
			continue
		}
		if !strings.Contains(err.Error(), c.mention) {
			t.Errorf("%v: error %q does not mention %s", c.args, err, c.mention)
		}
	}
}

// build serves the directory given with --root, and the demo site without
// it, with the disk gate reported for metrics.
func TestStaticBuildServes(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte("<p>mine</p>"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--root", dir}, "<p>mine</p>"},
		{nil, "sluice"},
	} {
		o, err := parseStatic(t, c.args, nil)
		if err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		h, gates, _, cleanup, err := o.build(staticTestLogger(&logs), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		resp, err := srv.Client().Get(srv.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		cleanup()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), c.want) {
			t.Errorf("%v: GET / = %d %q, want 200 containing %q", c.args, resp.StatusCode, body, c.want)
		}
		if len(gates) != 1 || gates[0].Name() != "disk" || gates[0].Stats().Admitted != 1 {
			t.Errorf("%v: gates %v, want the disk gate with one read", c.args, gates)
		}
		if !strings.Contains(logs.String(), "serving static files") {
			t.Errorf("%v: no startup log line: %q", c.args, logs.String())
		}
	}
}

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "1": 1, "1048576": 1 << 20, "512K": 512 << 10, "64MiB": 64 << 20, "64mb": 64 << 20,
		"1 GiB": 1 << 30, " 2G ": 2 << 30, "10B": 10, "8589934591G": 8589934591 << 30,
	} {
		if got, err := parseByteSize(in); err != nil || got != want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "K", "-1", "1.5M", "1T", "1 MiBs", "99999999999999999999", "8589934592G", "0x10"} {
		if got, err := parseByteSize(in); err == nil {
			t.Errorf("parseByteSize(%q) = %d, want an error", in, got)
		}
	}
}

func FuzzParseByteSize(f *testing.F) {
	for _, s := range []string{"0", "64MiB", "1 GB", "512k", "x", "-1", "9223372036854775807", "8589934592G", " 1 B "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseByteSize(s)
		if err != nil {
			return
		}
		if n < 0 {
			t.Fatalf("parseByteSize(%q) = %d: negative", s, n)
		}
		var b byteSize
		if err := b.Set(b.String()); err != nil { // the zero value round-trips
			t.Fatal(err)
		}
		b = byteSize(n)
		if back, err := parseByteSize(b.String()); err != nil || back != n {
			t.Fatalf("%q -> %d -> %q -> %d, %v", s, n, b.String(), back, err)
		}
	})
}
