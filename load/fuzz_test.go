package load

import (
	"bufio"
	"bytes"
	"errors"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

func FuzzParseProfile(f *testing.F) {
	f.Add([]byte(`{"name":"r","cases":[{"name":"a","qps_floor":10,"p99_budget_ms":100,"max_refusal_rate":0,"zero_drops":true}]}`))
	f.Add([]byte(`{"cases":[{"name":"a","duration":"1s","rate":5}]}`))
	f.Add([]byte(`{"cases":[]}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"cases":[{"name":"big","rate":1e308,"workers":99999999,"windows":99999999,"duration":"100000h"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseProfile(data)
		if err != nil {
			if !errors.Is(err, ErrBadProfile) {
				t.Fatalf("error %v is not ErrBadProfile", err)
			}
			return
		}
		if len(p.Cases) == 0 {
			t.Fatal("accepted a profile without cases")
		}
		for _, c := range p.Cases {
			if c.Name == "" || c.QPSFloor < 0 || (c.MaxErrorRate != nil && (*c.MaxErrorRate < 0 || *c.MaxErrorRate > 1)) {
				t.Fatalf("accepted a bad case %+v", c)
			}
			if c.Rate > MaxRate || c.Workers > MaxWorkers || c.Concurrency > MaxWorkers || c.Windows > MaxWindows {
				t.Fatalf("accepted a case past the size bounds %+v", c)
			}
			if c.Duration != "" {
				if d, err := time.ParseDuration(c.Duration); err != nil || d <= 0 || d > MaxWindowDuration {
					t.Fatalf("accepted duration %q", c.Duration)
				}
			}
			if _, err := p.Case(c.Name); err != nil {
				t.Fatalf("case %q not found: %v", c.Name, err)
			}
		}
	})
}

func FuzzParseTargets(f *testing.F) {
	f.Add([]byte("http://127.0.0.1:8080/a\nPOST http://h/b weight=2\n# c\n"))
	f.Add([]byte(`[{"url":"http://h/","headers":{"A":["b"]},"weight":3}]`))
	f.Add([]byte("GET\n"))
	f.Add([]byte(`[{"url":"http://h/","headers":{"X-A":["a\r\nInjected: yes"]}}]`))
	f.Add([]byte(`[{"url":"http://h/","headers":{"X-A":["a","b"],"x-a":["c"],"Host":["other"]}}]`))
	f.Add([]byte(`[{"method":"POST","url":"http://h/p?q=1","body":"aGk=","weight":999999999999}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ts, err := ParseTargets(data, Target{Method: "GET"})
		if err != nil {
			if !errors.Is(err, ErrBadTarget) {
				t.Fatalf("error %v is not ErrBadTarget", err)
			}
			return
		}
		if len(ts) == 0 {
			t.Fatal("no targets and no error")
		}
		for _, tg := range ts {
			if tg.Weight < 1 || tg.Method == "" || !(strings.HasPrefix(tg.URL, "http") || strings.HasPrefix(strings.ToLower(tg.URL), "http")) {
				t.Fatalf("accepted %+v", tg)
			}
			if _, err := CheckTarget(tg); err != nil {
				t.Fatalf("parsed target fails its own check: %v", err)
			}
		}
		// What the file says is what goes on the wire: the serialised
		// request parses back with exactly the file's header values, so no
		// value can add a header line of its own.
		wire, _, err := h1Targets(Config{Targets: ts})
		if err != nil {
			return // a URL net/url parses but h1 cannot address; CheckTarget is the judge of validity
		}
		for i, tg := range ts {
			req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(wire[i].wire)))
			if err != nil {
				t.Fatalf("serialised target %+v does not parse: %v\n%q", tg, err, wire[i].wire)
			}
			for k, vs := range tg.Header {
				ck := http.CanonicalHeaderKey(k)
				switch ck {
				case "Host", "Content-Length", "Connection", "Transfer-Encoding", "User-Agent":
					continue
				}
				var want []string
				for k2, vs2 := range tg.Header {
					if http.CanonicalHeaderKey(k2) == ck {
						for _, v := range vs2 {
							want = append(want, strings.Trim(v, " \t"))
						}
					}
				}
				got := req.Header.Values(ck)
				slices.Sort(want)
				got = slices.Clone(got)
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Fatalf("header %s: wire has %q, file had %q", ck, got, want)
				}
				_ = vs
			}
			if len(req.Header) > len(tg.Header)+3 {
				t.Fatalf("wire has headers %v, target %v", req.Header, tg.Header)
			}
		}
		p := newPicker(Weighted, ts, 0)
		for range 3 {
			if i := p.pick(); i < 0 || i >= len(ts) {
				t.Fatalf("pick %d out of range", i)
			}
		}
	})
}

func FuzzParseEnvelope(f *testing.F) {
	f.Add([]byte(`{"error":"BUSY","gate":"disk","reason":"full"}`))
	f.Add([]byte(`{"error":"RATE_LIMITED"}`))
	f.Add([]byte(`<html>busy</html>`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, ok := ParseEnvelope(data)
		if !ok {
			if e != (Envelope{}) {
				t.Fatal("not ok but non-empty")
			}
			return
		}
		if e.Error == "" || len(e.Gate) > maxLabel || len(e.Reason) > maxLabel {
			t.Fatalf("accepted %+v", e)
		}
		if !bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
			t.Fatal("accepted a non-object")
		}
	})
}

func FuzzParseReport(f *testing.F) {
	f.Add([]byte(`{"schema":"sluice/load-report/v1","kind":"load","steps":[],"verdict":{"status":"NONE"}}`))
	f.Add([]byte(`{"schema":"sluice/load-report/v1","kind":"merge","steps":[{"mode":"open","windows":[{"counts":{"scheduled":1,"sent":1,"ok":1}}]}],"verdict":{"status":"PASS"}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseReport(data)
		if err != nil {
			if !errors.Is(err, ErrBadReport) {
				t.Fatalf("error %v is not ErrBadReport", err)
			}
			return
		}
		for _, st := range r.Steps {
			for _, w := range st.Windows {
				if err := w.Counts.Reconcile(); err != nil {
					t.Fatalf("accepted a report that does not reconcile: %v", err)
				}
			}
		}
		// Whatever parses can be judged and written again (render has a
		// fuzz test of its own for drawing it).
		Judge(r, &Case{Name: "x", QPSFloor: 1})
		if _, err := marshalReport(r); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzParseMetrics(f *testing.F) {
	f.Add("sluice_admission_rejected_total{gate=\"disk\",kind=\"read\",reason=\"full\"} 3\nprocess_cpu_seconds_total 1.5\n")
	f.Add("# TYPE x counter\nx 1\n")
	f.Fuzz(func(t *testing.T, text string) {
		s := parseMetrics(strings.NewReader(text))
		if s.err == nil && s.rejected == nil {
			t.Fatal("no error and no map")
		}
		for k, v := range s.rejected {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				t.Fatalf("rejected %+v read as %v", k, v)
			}
		}
	})
}

func FuzzH1Response(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), false)
	f.Add([]byte("HTTP/1.1 503 x\r\nTransfer-Encoding: chunked\r\n\r\n3;a\r\nabc\r\n0\r\nT: 1\r\n\r\n"), false)
	f.Add([]byte("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 204 No\r\n\r\n"), true)
	f.Add([]byte("HTTP/1.0 200 OK\r\n\r\nrest"), false)
	f.Fuzz(func(t *testing.T, data []byte, head bool) {
		w := (&h1{}).newWorker(1)
		buf := make([]byte, 64)
		var r h1Result
		_, err := w.readResponse(bufio.NewReaderSize(bytes.NewReader(data), 16<<10), &h1Target{head: head}, buf, time.Now(), &r)
		if err == nil && (r.status < 100 || r.status > 999) {
			t.Fatalf("status %d accepted", r.status)
		}
		if r.n > len(buf) {
			t.Fatalf("kept %d bytes in a %d-byte buffer", r.n, len(buf))
		}
	})
}
