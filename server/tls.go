package server

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// certCheckInterval bounds how often the certificate files are looked at
// for a change: at most once a second, on a handshake.
const certCheckInterval = time.Second

// tlsAlertInternalError is a TLS alert record (fatal, internal_error),
// the busy reply for an over-limit TLS connection: written in answer to
// the ClientHello, it is what a TLS client can read before any handshake
// ("remote error: tls: internal error"), where an HTTP 503 in clear text
// would be garbage to it.
var tlsAlertInternalError = []byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x50}

// certReloader serves the certificate of a key pair of files and re-reads
// them when they change (a renewed certificate, a rotated Kubernetes
// secret), without a restart. A pair that fails to load at reload keeps
// the previous one in service and is logged.
type certReloader struct {
	certFile, keyFile string
	logger            *slog.Logger

	mu        sync.Mutex
	cert      *tls.Certificate // guarded by mu
	certStamp fileStamp        // guarded by mu
	keyStamp  fileStamp        // guarded by mu
	checked   time.Time        // guarded by mu
	now       func() time.Time
}

// fileStamp tells a rewritten or replaced file from the one loaded.
type fileStamp struct {
	mod  time.Time
	size int64
	ok   bool
}

func stampOf(name string) fileStamp {
	fi, err := os.Stat(name) // follows the symbolic links of a secret mount
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{mod: fi.ModTime(), size: fi.Size(), ok: true}
}

// newCertReloader loads the pair, or returns why it cannot.
func newCertReloader(certFile, keyFile string, logger *slog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, logger: logger, now: time.Now}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: TLS certificate %q and key %q: %w", ErrInvalidConfig, certFile, keyFile, err)
	}
	r.cert, r.certStamp, r.keyStamp, r.checked = &cert, stampOf(certFile), stampOf(keyFile), r.now()
	return r, nil
}

// getCertificate is tls.Config.GetCertificate.
func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := r.now(); now.Sub(r.checked) >= certCheckInterval {
		r.checked = now
		r.reloadLocked()
	}
	return r.cert, nil
}

// reloadLocked re-reads the pair if either file changed.
func (r *certReloader) reloadLocked() {
	cs, ks := stampOf(r.certFile), stampOf(r.keyFile)
	if cs == r.certStamp && ks == r.keyStamp {
		return
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		// Often half a rotation (the certificate written, the key not
		// yet): keep serving the old pair and try again later.
		if r.logger != nil {
			r.logger.Warn("TLS certificate changed but does not load; keeping the previous one", "cert", r.certFile, "key", r.keyFile, "err", err)
		}
		return
	}
	r.cert, r.certStamp, r.keyStamp = &cert, cs, ks
	if r.logger != nil {
		r.logger.Info("TLS certificate reloaded", "cert", r.certFile)
	}
}

// reloadNow re-reads the pair whether or not the files look changed; a
// pair that does not load keeps the previous one and is returned.
func (r *certReloader) reloadNow() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cs, ks := stampOf(r.certFile), stampOf(r.keyFile)
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("TLS certificate %q and key %q: %w", r.certFile, r.keyFile, err)
	}
	r.cert, r.certStamp, r.keyStamp, r.checked = &cert, cs, ks, r.now()
	return nil
}

// tlsConfig is the main listener's TLS configuration: Go's defaults from
// TLS 1.2 up, ALPN h2 (unless HTTP/2 is off) and http/1.1.
func (r *certReloader) tlsConfig(h2 bool) *tls.Config {
	protos := []string{"http/1.1"}
	if h2 {
		protos = []string{"h2", "http/1.1"}
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: protos, GetCertificate: r.getCertificate}
}
