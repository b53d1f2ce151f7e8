package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// nthRecord waits until the JSON log holds at least n records with msg
// and returns the n-th.
func nthRecord(t *testing.T, out *lockedBuffer, msg string, n int) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if rec := findRecord(out.String(), msg, n); rec != nil {
			return rec
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no %d-th log record %q in:\n%s", n, msg, out.String())
	return nil
}

// findRecord returns the n-th JSON log record with the given msg in
// logs, or nil.
func findRecord(logs, msg string, n int) map[string]any {
	seen := 0
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == msg {
			if seen++; seen == n {
				return rec
			}
		}
	}
	return nil
}

// heldUpstream answers "<name>" at once, except /slow, which it holds
// until release is closed (or the request ends).
func heldUpstream(t *testing.T, name string, entered chan<- string, release <-chan struct{}) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			entered <- name
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		fmt.Fprint(w, name)
	}))
	t.Cleanup(s.Close)
	return s
}

type proxyView struct {
	Extra struct {
		Proxy struct {
			Upstreams []struct{ URL string } `json:"upstreams"`
			Routes    []struct {
				Name string
				Gate *struct {
					Capacity, Inflight int64
					Admitted           uint64
				}
			} `json:"routes"`
		} `json:"proxy"`
	} `json:"extra"`
}

func (v proxyView) route(name string) (capacity, inflight int64, admitted uint64, ok bool) {
	for _, r := range v.Extra.Proxy.Routes {
		if r.Name == name && r.Gate != nil {
			return r.Gate.Capacity, r.Gate.Inflight, r.Gate.Admitted, true
		}
	}
	return 0, 0, 0, false
}

// TestProxySIGHUPReloads runs the real binary and sends it SIGHUP with
// requests in flight: they complete; the new routes, the raised capacity
// (on the same gate, so two more requests fit, not four) and the new
// upstream apply; an unchanged quota keeps its clients' buckets. A file
// that does not parse, and one that changes what needs a new gate, are
// refused with a log line and the running rules stay. Before, SIGHUP
// killed the proxy (exit 129) and cut every request in flight.
func TestProxySIGHUPReloads(t *testing.T) {
	entered, release := make(chan string, 16), make(chan struct{})
	upA := heldUpstream(t, "a", entered, release)
	upB := heldUpstream(t, "b", entered, release)
	quota := `"quota":{"rate":0.001,"burst":1,"key":"header:K"}`
	rules := func(up *httptest.Server, slow string, extra string) string {
		return `{"upstreams":["` + up.URL + `"],"routes":[{"name":"slow","path":"/slow",` + slow + `},` +
			`{"name":"limited","path":"/limited",` + quota + `}` + extra + `]}`
	}
	path := writeRules(t, rules(upA, `"max_inflight":2`, ""))
	rewrite := func(s string) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil { // as an editor or a config manager replaces it
			t.Fatal(err)
		}
	}
	c := startChild(t, 0, "proxy", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--log-format", "json",
		"--config", path, "--drain-delay", "0", "--shutdown-timeout", "5s")
	rec := c.record(t, "proxying")
	addr, admin := fmt.Sprint(rec["addr"]), fmt.Sprint(rec["admin_addr"])
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	get := func(p string, hdr ...string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+p, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	view := func() proxyView {
		t.Helper()
		resp, err := cl.Get("http://" + admin + "/state")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v proxyView
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	type answer struct {
		code int
		body string
	}
	var wg sync.WaitGroup
	answers := make(chan answer, 8)
	hold := func(from string) {
		t.Helper()
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/slow", nil)
			resp, err := cl.Do(req)
			if err != nil {
				answers <- answer{-1, err.Error()}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			answers <- answer{resp.StatusCode, string(b)}
		})
		if got := <-entered; got != from {
			t.Fatalf("a held request reached upstream %q, want %q", got, from)
		}
	}
	hup := func() {
		t.Helper()
		if err := c.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}

	hold("a")
	hold("a")
	if code, _ := get("/limited", "K", "alice"); code != http.StatusOK {
		t.Fatalf("first /limited: %d", code)
	}
	if code, _ := get("/limited", "K", "alice"); code != http.StatusTooManyRequests {
		t.Fatalf("second /limited: %d, want 429", code)
	}
	_, _, admittedBefore, _ := view().route("slow")

	rewrite(rules(upB, `"max_inflight":4`, `,{"name":"fresh","path":"/fresh","max_inflight":1}`))
	hup()
	done := nthRecord(t, c.logs, "SIGHUP: reloaded", 1)
	if fmt.Sprint(done["resized"]) != "[slow 2->4]" || fmt.Sprint(done["added"]) != "[fresh]" || done["upstreams_added"] != float64(1) {
		t.Fatalf("reload record %v", done)
	}
	v := view()
	capacity, inflight, admitted, _ := v.route("slow")
	if capacity != 4 || inflight != 2 || admitted != admittedBefore {
		t.Fatalf("route slow after the reload: capacity %d, inflight %d, admitted %d (%d before); want the same gate, 4 slots, 2 held", capacity, inflight, admitted, admittedBefore)
	}
	if _, _, _, ok := v.route("fresh"); !ok || len(v.Extra.Proxy.Upstreams) != 1 || v.Extra.Proxy.Upstreams[0].URL != upB.URL {
		t.Fatalf("/state after the reload: %+v", v.Extra.Proxy)
	}
	if code, _ := get("/limited", "K", "alice"); code != http.StatusTooManyRequests {
		t.Fatalf("/limited after the reload: %d, want 429: the unchanged quota keeps alice's empty bucket", code)
	}
	if code, body := get("/"); code != http.StatusOK || body != "b" {
		t.Fatalf("after the reload: %d %q, want the new upstream's answer", code, body)
	}
	hold("b")
	hold("b")
	if code, body := get("/slow"); code != http.StatusServiceUnavailable || !strings.Contains(body, `"gate":"slow","reason":"full"`) {
		t.Fatalf("fifth /slow: %d %s; want 503 full: 2 old and 2 new requests fill the 4 slots", code, body)
	}
	resp, err := cl.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`sluice_admission_capacity{gate="fresh"} 1`, `sluice_admission_capacity{gate="slow"} 4`} {
		if !bytes.Contains(metrics, []byte(want)) {
			t.Fatalf("/metrics lacks %s after the reload:\n%s", want, grepLines(string(metrics), "admission_capacity"))
		}
	}

	for i, bad := range []struct{ file, why string }{
		{`{"routes":[{"name":"a"}],"routes":[{"name":"b"}]}`, `key \"routes\" given twice`},
		{rules(upB, `"max_inflight":4,"queue":3`, ""), "restart the proxy"},
	} {
		rewrite(bad.file)
		hup()
		refused := nthRecord(t, c.logs, "SIGHUP: reload refused; the running routes and upstreams stay", i+1)
		if !strings.Contains(fmt.Sprint(refused["err"]), strings.ReplaceAll(bad.why, `\"`, `"`)) {
			t.Fatalf("refusal %d: %v, want it to say %s", i, refused, bad.why)
		}
		if capacity, inflight, _, _ := view().route("slow"); capacity != 4 || inflight != 4 {
			t.Fatalf("after refused reload %d: slow has %d slots, %d held; want the running 4 and 4", i, capacity, inflight)
		}
		if code, body := get("/"); code != http.StatusOK || body != "b" {
			t.Fatalf("after refused reload %d: %d %q", i, code, body)
		}
	}

	close(release)
	wg.Wait()
	close(answers)
	n := 0
	for a := range answers {
		n++
		if a.code != http.StatusOK {
			t.Errorf("a request in flight through the reloads: %d %q, want 200", a.code, a.body)
		}
	}
	if n != 4 {
		t.Fatalf("%d answers, want 4", n)
	}
	tr.CloseIdleConnections()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := c.wait(t, 10*time.Second); code != exitOK {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, c.logs)
	}
}

// sameSizePair writes a new self-signed pair over certFile and keyFile
// with their sizes and modification times, so that only a forced re-read,
// never the periodic check of the files' stamps, can notice it. A PEM
// file may begin with text before its first block, so the new files are
// brought to the old sizes with leading newlines; the old pair was padded
// the same way when it was written (padPair), so a new one is never
// larger.
func sameSizePair(t *testing.T, certFile, keyFile string) *x509.Certificate {
	t.Helper()
	stamp := func(name string) (int64, time.Time) {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size(), fi.ModTime()
	}
	certSize, certTime := stamp(certFile)
	keySize, keyTime := stamp(keyFile)
	c, k, cert := selfSigned(t, t.TempDir())
	for _, f := range []struct {
		from, to string
		size     int64
		at       time.Time
	}{{c, certFile, certSize, certTime}, {k, keyFile, keySize, keyTime}} {
		b, err := os.ReadFile(f.from)
		if err != nil {
			t.Fatal(err)
		}
		pad := f.size - int64(len(b))
		if pad < 0 {
			t.Fatalf("the new %s is %d bytes larger than the one in service", f.to, -pad)
		}
		b = append([]byte(strings.Repeat("\n", int(pad))), b...)
		if err := os.WriteFile(f.to, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(f.to, f.at, f.at); err != nil {
			t.Fatal(err)
		}
	}
	return cert
}

// padPair puts padPEM leading newlines in front of a pair's files:
// room for sameSizePair, whose new pair may be a few bytes larger (an
// ECDSA signature's length varies).
func padPair(t *testing.T, files ...string) {
	t.Helper()
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, append([]byte(strings.Repeat("\n", padPEM)), b...), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

const padPEM = 32

// TestServeSIGHUPReloadsTLS runs the real `sluice serve` over TLS and sends
// it SIGHUP: it keeps serving (before, it died with exit 129) and serves
// the rotated certificate at once; a pair that does not load is logged
// and the one in service stays.
func TestServeSIGHUPReloadsTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, first := selfSigned(t, dir)
	padPair(t, certFile, keyFile)
	c := startChild(t, 0, "serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--log-format", "json",
		"--drain-delay", "0", "--tls-cert", certFile, "--tls-key", keyFile)
	addr := fmt.Sprint(c.record(t, "serving")["addr"])
	served := func() *x509.Certificate {
		t.Helper()
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) // the test compares the certificate itself
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0]
	}
	hup := func() {
		t.Helper()
		if err := c.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	if !served().Equal(first) {
		t.Fatal("not serving the first certificate")
	}
	second := sameSizePair(t, certFile, keyFile)
	hup()
	c.nthRecord(t, "SIGHUP: TLS certificate reloaded", 1)
	if !served().Equal(second) {
		t.Fatal("after SIGHUP the rotated certificate is not served")
	}
	if err := os.WriteFile(certFile, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	hup()
	c.nthRecord(t, "SIGHUP: TLS certificate refused; the one in service stays", 1)
	if !served().Equal(second) {
		t.Fatal("a pair that does not load replaced the one in service")
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := c.wait(t, 10*time.Second); code != exitOK {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, c.logs)
	}
}
