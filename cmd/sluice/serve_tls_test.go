package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"github.com/sluicehq/sluice/load"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfSigned writes a certificate for 127.0.0.1 and its key into dir.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ = x509.ParseCertificate(der)
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, cert
}

func TestServeTLSFlags(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, cert := selfSigned(t, dir)
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		envs map[string]string
		want string
	}{
		{[]string{"--tls-cert", certFile}, nil, "--tls-cert and --tls-key go together"},
		{[]string{"--tls-cert", certFile, "--tls-key", garbage}, nil, "TLS certificate"},
		{nil, map[string]string{"SLUICE_TLS_CERT": certFile, "SLUICE_TLS_KEY": filepath.Join(dir, "missing.pem")}, "missing.pem"},
		{[]string{"--max-concurrent-streams", "-1"}, nil, "--max-concurrent-streams -1"},
	} {
		code, out := runSubcommand(context.Background(), runServe, c.envs, append([]string{"--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}, c.args...)...)
		if code != exitUsage || !strings.Contains(out, c.want) {
			t.Errorf("%v %v: exit %d, %q; want 2 and %q", c.args, c.envs, code, out, c.want)
		}
	}

	// A good pair: HTTP/2 and HTTP/1.1 over TLS, and h2c beside it is
	// refused on the TLS port (clear text there gets net/http's 400).
	s := startServeInProcess(t, "--tls-cert", certFile, "--tls-key", keyFile, "--max-concurrent-streams", "8")
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	for _, h2 := range []bool{true, false} {
		p := new(http.Protocols)
		p.SetHTTP1(!h2)
		p.SetHTTP2(h2)
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, Protocols: p}
		resp, err := (&http.Client{Transport: tr}).Get("https://" + s.addr + "/")
		if err != nil {
			t.Fatalf("h2=%v: %v", h2, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		tr.CloseIdleConnections()
		if resp.StatusCode != 200 || (h2 && resp.Proto != "HTTP/2.0") || (!h2 && resp.Proto != "HTTP/1.1") {
			t.Errorf("h2=%v: %d %s", h2, resp.StatusCode, resp.Proto)
		}
	}
	if rec := logRecord(t, s.out, "serving"); rec["tls"] != true {
		t.Errorf("serving record says tls=%v", rec["tls"])
	}
}

// The driver reaches a TLS server with a self-signed certificate only when
// told to (--insecure), over HTTP/2 and HTTP/1.1 alike.
// Over a second: real sluice load runs against a TLS serve process, over HTTP/2
// and HTTP/1.1.
func TestLoadInsecureAgainstTLSServe(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, _ := selfSigned(t, dir)
	s := startServeInProcess(t, "--tls-cert", certFile, "--tls-key", keyFile)
	out := filepath.Join(dir, "run.json")
	for _, c := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"--insecure", "--http2"}, true},
		{[]string{"--insecure"}, true},
		{nil, false},
	} {
		args := append([]string{"https://" + s.addr + "/", "--rate", "50", "--duration", "300ms", "--out", out, "--live", "off"}, c.args...)
		code, text := runSubcommand(context.Background(), runLoad, nil, args...)
		rep, err := load.ReadReport(out)
		if err != nil || len(rep.Steps) == 0 || len(rep.Steps[0].Windows) == 0 {
			t.Fatalf("%v: exit %d, report: %v\n%s", c.args, code, err, text)
		}
		ok := rep.Steps[0].Windows[0].Counts.OK
		if (ok > 0) != c.ok {
			t.Errorf("%v: ok responses %d, want some=%v (exit %d)\n%s", c.args, ok, c.ok, code, text)
		}
		os.Remove(out)
	}
}

// sluice proxy takes serve's TLS flags: HTTP/2 over TLS in front of a
// plain upstream.
// Over a second: a TLS proxy process in front of a real upstream, asked
// over HTTP/2.
func TestProxyOverTLS(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello from upstream")
	}))
	defer up.Close()
	certFile, keyFile, cert := selfSigned(t, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out lockedBuffer
	done := make(chan int, 1)
	go func() {
		e := env{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
		done <- runProxy(ctx, e, []string{"--upstream", up.URL, "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0",
			"--log-format", "json", "--drain-delay", "0s", "--tls-cert", certFile, "--tls-key", keyFile})
	}()
	rec := logRecord(t, &out, "proxying")
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	p := new(http.Protocols)
	p.SetHTTP2(true)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, Protocols: p}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("https://" + fmt.Sprint(rec["addr"]) + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Proto != "HTTP/2.0" || string(body) != "hello from upstream" {
		t.Errorf("%d %s %q", resp.StatusCode, resp.Proto, body)
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
}
