package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/server"
)

// certPair is a self-signed certificate for 127.0.0.1, as PEM.
type certPair struct {
	certPEM, keyPEM []byte
	serial          *big.Int
	cert            *x509.Certificate
}

func newCertPair(t testing.TB, serial int64) certPair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "sluice test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return certPair{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}),
		serial:  big.NewInt(serial), cert: cert,
	}
}

// install writes the pair into dir as cert.pem and key.pem, each by
// rename, as a secret mount or certbot would.
func (p certPair) install(t testing.TB, dir string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for name, data := range map[string][]byte{certFile: p.certPEM, keyFile: p.keyPEM} {
		tmp := name + ".tmp"
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, name); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}

// tlsClient trusts the given certificates and speaks h2 or HTTP/1.1.
func tlsClient(h2 bool, trusted ...*x509.Certificate) (*http.Client, *http.Transport) {
	pool := x509.NewCertPool()
	for _, c := range trusted {
		pool.AddCert(c)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	p := new(http.Protocols)
	p.SetHTTP1(!h2)
	p.SetHTTP2(h2)
	tr.Protocols = p
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}, tr
}

// TestTLSServesHTTP2AndHTTP1: with a certificate the main listener
// speaks TLS, ALPN h2 and http/1.1; the gate sees each HTTP/2 stream as a
// request.
func TestTLSServesHTTP2AndHTTP1(t *testing.T) {
	pair := newCertPair(t, 1)
	certFile, keyFile := pair.install(t, t.TempDir())
	f := start(t, admit.Config{Capacity: 4}, func(c *server.Config) { c.TLSCertFile, c.TLSKeyFile = certFile, keyFile })
	close(f.finish)
	base := strings.Replace(f.base, "http://", "https://", 1)
	for _, h2 := range []bool{true, false} {
		c, tr := tlsClient(h2, pair.cert)
		resp, err := c.Get(base + "/work")
		if err != nil {
			t.Fatalf("h2=%v: %v", h2, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		tr.CloseIdleConnections()
		want := map[bool]string{true: "HTTP/2.0", false: "HTTP/1.1"}[h2]
		if resp.Proto != want || string(b) != "finished" || resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 {
			t.Errorf("h2=%v: %s %q TLS %v; want %s", h2, resp.Proto, b, resp.TLS != nil, want)
		}
	}
	if s := f.gate.Stats(); s.Admitted != 2 || s.Completed[admit.OutcomeOK] != 2 {
		t.Errorf("gate: admitted %d, completed %v; want one per request", s.Admitted, s.Completed)
	}
	// Clear text on the TLS port is not served: net/http answers 400.
	if r, err := f.get(t, f.base+"/cheap"); err == nil && r.status != http.StatusBadRequest {
		t.Errorf("a clear-text request to the TLS listener got %d %q, want 400", r.status, r.body)
	}
}

// TestTLSBadPairRefused: a pair that does not load is a configuration
// error at Listen, with the reason; half a pair too.
func TestTLSBadPairRefused(t *testing.T) {
	dir := t.TempDir()
	a, b := newCertPair(t, 1), newCertPair(t, 2)
	certFile, _ := a.install(t, dir)
	otherKey := filepath.Join(dir, "other.pem")
	if err := os.WriteFile(otherKey, b.keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]server.Config{
		"mismatched key": {TLSCertFile: certFile, TLSKeyFile: otherKey},
		"missing key":    {TLSCertFile: certFile, TLSKeyFile: filepath.Join(dir, "nope.pem")},
		"cert only":      {TLSCertFile: certFile},
	} {
		cfg.Addr, cfg.AdminAddr = "127.0.0.1:0", "127.0.0.1:0"
		cfg.Conn.MaxConns = 8
		srv, err := server.Listen(context.Background(), cfg)
		if err == nil {
			srv.Close()
			t.Errorf("%s: Listen accepted", name)
			continue
		}
		if !errors.Is(err, server.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
	}
}

// TestCertificateRotationWhileServing: the certificate files are replaced
// while clients keep making new TLS connections; no request fails, the
// new certificate is served within seconds, and a broken pair written
// later keeps the last good one in service.
// About 2 s: real TLS clients keep connecting while the files change on
// disk, until the new certificate is served and a broken pair has been seen
// and kept out.
func TestCertificateRotationWhileServing(t *testing.T) {
	dir := t.TempDir()
	oldPair, newPair := newCertPair(t, 1), newCertPair(t, 2)
	certFile, keyFile := oldPair.install(t, dir)
	f := start(t, admit.Config{Capacity: 4}, func(c *server.Config) { c.TLSCertFile, c.TLSKeyFile = certFile, keyFile })
	base := strings.Replace(f.base, "http://", "https://", 1)

	var served atomic.Int64
	var mu sync.Mutex
	var failures []string
	var newSeen atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, tr := tlsClient(false, oldPair.cert, newPair.cert)
				tr.DisableKeepAlives = true // a handshake per request
				resp, err := c.Get(base + "/cheap")
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.TLS.PeerCertificates[0].SerialNumber.Cmp(newPair.serial) == 0 {
						newSeen.Store(true)
					}
				}
				tr.CloseIdleConnections()
				served.Add(1)
				if err != nil || resp.StatusCode != 200 {
					mu.Lock()
					failures = append(failures, errString(err))
					mu.Unlock()
				}
			}
		})
	}
	time.Sleep(100 * time.Millisecond)
	newPair.install(t, dir)
	// The files are checked at most once a second: 5 such checks are
	// ample on a loaded machine, and a reload that never comes fails in
	// 5 s rather than the usual 10.
	testutil.EventuallyWithin(t, 5*time.Second, "the new certificate to be served", newSeen.Load)
	// Half a rotation: a certificate that does not match the key.
	if err := os.WriteFile(certFile, oldPair.certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the broken pair to be reported", func() bool {
		return strings.Contains(f.logs.String(), "TLS certificate changed but does not load")
	})
	close(stop)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d of %d requests failed during the rotation: %v", len(failures), served.Load(), failures[:min(3, len(failures))])
	}
	c, tr := tlsClient(false, newPair.cert)
	defer tr.CloseIdleConnections()
	resp, err := c.Get(base + "/cheap")
	if err != nil {
		t.Fatalf("after a broken rotation the last good certificate is not served: %v", err)
	}
	resp.Body.Close()
	t.Logf("%d requests during the rotation", served.Load())
}

func errString(err error) string {
	if err == nil {
		return "non-200"
	}
	return err.Error()
}

// TestOverLimitTLSConnectionSeesARefusal: beyond MaxConns a TLS client
// gets a TLS alert it can read ("internal error"), not an HTTP 503 in
// clear text that it would take for garbage.
func TestOverLimitTLSConnectionSeesARefusal(t *testing.T) {
	pair := newCertPair(t, 1)
	certFile, keyFile := pair.install(t, t.TempDir())
	f := start(t, admit.Config{Capacity: 4}, func(c *server.Config) {
		c.TLSCertFile, c.TLSKeyFile = certFile, keyFile
		c.Conn.MaxConns = 1
	})
	pool := x509.NewCertPool()
	pool.AddCert(pair.cert)
	addr := strings.TrimPrefix(f.base, "http://")
	first, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	eventually(t, "the first connection to hold the only slot", func() bool { return f.srv.State().Connections.Open == 1 })
	second, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool})
	if err == nil {
		second.Close()
		t.Fatal("an over-limit TLS connection completed its handshake")
	}
	if !strings.Contains(err.Error(), "internal error") {
		t.Errorf("over-limit TLS handshake failed with %v, want the server's alert (internal error)", err)
	}
	if n := f.srv.State().Connections.Rejected["max_conns"]; n != 1 {
		t.Errorf("rejected %d, want 1", n)
	}
}

// TestReloadTLS: ReloadTLS serves a rotated pair at once, even one whose
// files kept their sizes and times (which the periodic check of the
// files' stamps cannot see), and keeps the pair in service when the new
// one does not load.
func TestReloadTLS(t *testing.T) {
	dir := t.TempDir()
	first := newCertPair(t, 1)
	certFile, keyFile := first.install(t, dir)
	f := start(t, admit.Config{Capacity: 4}, func(c *server.Config) { c.TLSCertFile, c.TLSKeyFile = certFile, keyFile })
	addr := strings.TrimPrefix(f.base, "http://")
	served := func() *big.Int {
		t.Helper()
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) // the serial is what is compared
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber
	}
	if served().Cmp(first.serial) != 0 {
		t.Fatal("not serving the first pair")
	}
	var second certPair
	for i := range 50 { // an ECDSA signature's length varies by a byte or two
		if second = newCertPair(t, 2); len(second.certPEM) == len(first.certPEM) && len(second.keyPEM) == len(first.keyPEM) {
			break
		}
		if i == 49 {
			t.Fatal("no pair of the same size in 50 tries")
		}
	}
	stamps := map[string]time.Time{}
	for _, name := range []string{certFile, keyFile} {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		stamps[name] = fi.ModTime()
	}
	second.install(t, dir)
	for name, mod := range stamps {
		if err := os.Chtimes(name, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.srv.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	if served().Cmp(second.serial) != 0 {
		t.Fatal("after ReloadTLS the rotated pair is not served")
	}
	if err := os.WriteFile(certFile, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := f.srv.ReloadTLS(); err == nil || !strings.Contains(err.Error(), certFile) {
		t.Fatalf("ReloadTLS of a broken pair: %v, want an error naming %s", err, certFile)
	}
	if served().Cmp(second.serial) != 0 {
		t.Fatal("a pair that does not load replaced the one in service")
	}
}
