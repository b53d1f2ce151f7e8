package connlimit

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

// sendChunk is the most bytes one ReadFrom call hands to the connection
// (sendfile on Linux) before the send deadline is renewed. A client must
// take this much within SendTimeout to count as live; 64 KiB is a fraction
// of a socket buffer, so even a slow link moves it in well under a second.
const sendChunk = 64 << 10

// connKey is the context key under which ConfigureServer's ConnContext
// stores the accepted connection.
type connKey struct{}

// withDeadlines wraps next so that every response write and every read of
// a declared request body runs under a deadline renewed on progress:
// SendTimeout after the last successful write, BodyTimeout after the last
// successful body read. The deadlines are set with http.ResponseController,
// so they work for any ResponseWriter that supports them (HTTP/1.x and
// HTTP/2); for one that does not, the request runs without them.
func (l *Listener) withDeadlines(next http.Handler) http.Handler {
	send, body := l.cfg.sendTimeout, l.cfg.bodyTimeout
	if send < 0 && body < 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := r.Context().Value(connKey{}).(*Conn)
		rc := http.NewResponseController(w)
		if body > 0 && r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			b := &deadlineBody{rc: rc, rd: r.Body, timeout: body, conn: c}
			if b.renew() == nil {
				r = r.WithContext(r.Context()) // a shallow copy: net/http keeps the original body for its own discard
				r.Body = b
			}
		}
		if send < 0 {
			next.ServeHTTP(w, r)
			return
		}
		dw := &deadlineWriter{ResponseWriter: w, rc: rc, timeout: send}
		// The deadline also bounds what net/http writes on its own: the
		// buffered tail after the handler returns, a 100 Continue.
		dw.renew()
		next.ServeHTTP(dw, r)
		dw.renew()
	})
}

// deadlineWriter renews the write deadline before every write.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	set     time.Time // the deadline this writer set last; zero before the first
}

// renew moves the deadline to SendTimeout from now, unless the one this
// writer set is already within a hundredth of that: a small answer then
// costs one deadline (one timer operation) instead of one per write, and
// a long one still renews as it progresses.
func (d *deadlineWriter) renew() {
	at := time.Now().Add(d.timeout)
	if !d.set.IsZero() && at.Sub(d.set) < d.timeout/100 {
		return
	}
	_ = d.rc.SetWriteDeadline(at)
	d.set = at
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	d.renew()
	return d.ResponseWriter.Write(p)
}

// ReadFrom copies src in chunks of sendChunk, renewing the deadline before
// each, so that a long sendfile to a slow but live client is not cut,
// while one that stops reading is. A *io.LimitedReader source is chunked
// over its own reader so that net.TCPConn still recognises a file and
// uses sendfile.
func (d *deadlineWriter) ReadFrom(src io.Reader) (int64, error) {
	rf, ok := d.ResponseWriter.(io.ReaderFrom)
	if !ok {
		d.renew()
		return io.Copy(writerOnly{d}, src)
	}
	inner, remain := src, int64(-1)
	if lr, ok := src.(*io.LimitedReader); ok {
		inner, remain = lr.R, lr.N
		defer func() { lr.N = remain }()
	}
	var total int64
	for remain != 0 {
		size := int64(sendChunk)
		if remain > 0 {
			size = min(size, remain)
		}
		d.renew()
		n, err := rf.ReadFrom(&io.LimitedReader{R: inner, N: size})
		total += n
		if remain > 0 {
			remain -= n
		}
		if err != nil || n < size {
			return total, err
		}
	}
	return total, nil
}

// Flush forwards to the wrapped writer, under a renewed deadline.
func (d *deadlineWriter) Flush() {
	d.renew()
	_ = d.rc.Flush()
}

// Hijack keeps http.Hijacker visible to code that asserts it (WebSocket
// upgrades). net/http clears the request's deadlines when it hands the
// connection over.
func (d *deadlineWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) { return d.rc.Hijack() }

// Unwrap lets http.ResponseController reach the wrapped writer.
func (d *deadlineWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }

// deadlineBody renews the read deadline after every successful read of a
// request body. At the end of the body net/http lifts the deadline itself
// (its background read, which watches for the client going away, starts
// without one); deadlineBody only stops attributing timeouts to the body.
type deadlineBody struct {
	rc      *http.ResponseController
	rd      io.ReadCloser
	timeout time.Duration
	conn    *Conn // nil when the connection is not one of ours
}

func (b *deadlineBody) renew() error {
	at := time.Now().Add(b.timeout)
	if b.conn != nil {
		b.conn.bodyDeadline.Store(at.UnixNano())
	}
	return b.rc.SetReadDeadline(at)
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.rd.Read(p)
	switch {
	case err == io.EOF:
		if b.conn != nil {
			b.conn.bodyDeadline.Store(0)
		}
	case err == nil && n > 0:
		_ = b.renew()
	}
	return n, err
}

func (b *deadlineBody) Close() error { return b.rd.Close() }

// connContext stores the accepted connection in the connection's context,
// for withDeadlines.
func (l *Listener) connContext(ctx context.Context, nc net.Conn) context.Context {
	if c := l.ownConn(nc); c != nil {
		return context.WithValue(ctx, connKey{}, c)
	}
	return ctx
}

// noteWriteErr counts a connection whose write missed its deadline: the
// send timeout (net/http closes a connection after a failed write).
func (c *Conn) noteWriteErr(err error) {
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) && c.sendTimedOut.CompareAndSwap(false, true) {
		c.l.c.closedSendTimeout.Add(1)
	}
}

// noteReadDeadline counts a read that missed the body deadline. A read
// deadline error before that deadline is someone else's (net/http aborts
// its background read with a deadline in the past).
func (c *Conn) noteReadDeadline() {
	at := c.bodyDeadline.Load()
	if at != 0 && time.Now().UnixNano() >= at && c.bodyTimedOut.CompareAndSwap(false, true) {
		c.l.c.closedBodyTimeout.Add(1)
	}
}
