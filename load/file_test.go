package load

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "r.json")
	if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(p, []byte("new content")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "new content" {
		t.Errorf("content %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}
	// A folder that does not exist: an error and no file.
	bad := filepath.Join(dir, "missing", "r.json")
	if err := WriteFileAtomic(bad, []byte("x")); err == nil {
		t.Error("write into a missing folder succeeded")
	}
	// The target is a folder: rename fails, the temp file is cleaned up and
	// the folder is untouched.
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	if err := WriteFileAtomic(sub, []byte("x")); err == nil {
		t.Error("overwrote a folder")
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left after a failed write", e.Name())
		}
	}
}

func TestReportRoundTrip(t *testing.T) {
	r := realReport(t)
	p := filepath.Join(t.TempDir(), DefaultReportName(r.Started))
	if err := WriteReport(p, r); err != nil {
		t.Fatal(err)
	}
	back, err := ReadReport(p)
	if err != nil {
		t.Fatal(err)
	}
	b1, _ := MarshalReport(r)
	b2, _ := MarshalReport(back)
	if !bytes.Equal(b1, b2) {
		t.Error("report changed in a write/read round trip")
	}
	if !strings.HasPrefix(filepath.Base(p), "load-report-") || !strings.HasSuffix(p, "Z.json") {
		t.Errorf("default name %s", p)
	}
}

func TestParseReportRejects(t *testing.T) {
	r := realReport(t)
	good, _ := MarshalReport(r)
	mutate := func(f func(*Report)) []byte {
		c, _ := ParseReport(good)
		f(c)
		b, _ := MarshalReport(c)
		return b
	}
	cases := map[string][]byte{
		"not json":       []byte("{"),
		"empty":          []byte(""),
		"trailing":       append(append([]byte{}, good...), []byte("{}")...),
		"unknown field":  bytes.Replace(good, []byte(`"schema"`), []byte(`"extra": 1, "schema"`), 1),
		"wrong schema":   mutate(func(c *Report) { c.Schema = "other/v9" }),
		"bad kind":       mutate(func(c *Report) { c.Kind = "party" }),
		"bad verdict":    mutate(func(c *Report) { c.Verdict.Status = "MAYBE" }),
		"no reconcile":   mutate(func(c *Report) { c.Steps[0].Windows[0].Counts.OK++ }),
		"sent mismatch":  mutate(func(c *Report) { c.Steps[0].Windows[0].Counts.Sent++ }),
		"histogram lies": mutate(func(c *Report) { c.Steps[0].Windows[0].Latency.ResponseTime.Count++ }),
		"histogram junk": mutate(func(c *Report) { c.Steps[0].Windows[0].Latency.RequestTime.Hist = "bm90IGEgaGlzdG9ncmFt" }),
		"timeline lies":  mutate(func(c *Report) { c.Steps[0].Windows[0].Timeline[0].Scheduled++ }),
		"bad mode":       mutate(func(c *Report) { c.Steps[0].Mode = "ajar" }),
		"refusals lie":   mutate(func(c *Report) { c.Steps[0].Windows[0].Counts.Refusals = nil }),
		"no steps":       mutate(func(c *Report) { c.Steps = nil }),
	}
	for name, b := range cases {
		if _, err := ParseReport(b); !errors.Is(err, ErrBadReport) {
			t.Errorf("%s: err = %v, want ErrBadReport", name, err)
		}
	}
	if _, err := ReadReport(filepath.Join(t.TempDir(), "none.json")); !errors.Is(err, ErrBadReport) {
		t.Errorf("missing file: %v", err)
	}
}
