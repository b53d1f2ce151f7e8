package connlimit

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// errNoCloseWrite is returned by Conn.CloseWrite when the wrapped
// connection cannot half-close.
var errNoCloseWrite = errors.New("connlimit: wrapped connection does not support CloseWrite")

// Conn is an accepted connection that holds one of the Listener's slots;
// Listener.Accept is the only source of Conns. Close releases the slot
// exactly once, however many times it is called, and whichever goroutine
// calls it.
//
// Conn forwards CloseWrite and ReadFrom to the wrapped connection, so
// net/http's graceful close and sendfile keep working; NetConn returns
// the wrapped connection.
type Conn struct {
	net.Conn
	l *Listener

	closeOnce sync.Once
	closeErr  error

	// HTTP bookkeeping for ConnState (see http.go): the last state seen,
	// whether bytes arrived since the connection went idle, whether the
	// latest read ended in a deadline, and whether one had when the
	// connection turned active.
	httpState        atomic.Int32
	readSinceIdle    atomic.Bool
	readTimedOut     atomic.Bool
	timedOutToActive atomic.Bool
	closeCounted     atomic.Bool

	// Send and body deadlines (see deadline.go): the body deadline in
	// force (Unix ns, 0 for none), and whether a timeout was counted.
	bodyDeadline atomic.Int64
	sendTimedOut atomic.Bool
	bodyTimedOut atomic.Bool
}

// Read reads from the wrapped connection, noting what ConnState needs to
// tell an idle timeout from a header timeout.
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.NoteRead(n, err)
	return n, err
}

// NoteRead keeps the books Read keeps for a read made on the wrapped
// connection directly: an HTTP server that reads the socket itself
// (sluice's HTTP/1.1 engine does, to save a system call per request)
// reports each read, so ConnState and the body timeout count as they do
// for reads through Read.
func (c *Conn) NoteRead(n int, err error) {
	if n > 0 {
		c.readSinceIdle.Store(true)
		c.readTimedOut.Store(false)
	}
	if err != nil {
		timedOut := errors.Is(err, os.ErrDeadlineExceeded)
		c.readTimedOut.Store(timedOut)
		if timedOut {
			c.noteReadDeadline()
		}
	}
}

// Write writes to the wrapped connection, counting a send timeout.
func (c *Conn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil {
		c.noteWriteErr(err)
	}
	return n, err
}

// Close closes the wrapped connection and releases the slot. Only the
// first call has an effect; later calls return its result.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		c.closeErr = c.Conn.Close()
		c.l.release()
	})
	return c.closeErr
}

// NetConn returns the wrapped connection. Closing it directly does not
// release the slot; close the Conn.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// CloseWrite half-closes the wrapped connection when it supports it
// (*net.TCPConn and *net.UnixConn do).
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errNoCloseWrite
}

// ReadFrom lets io.Copy into the connection use the wrapped
// connection's fast path (sendfile, splice) when it has one.
func (c *Conn) ReadFrom(r io.Reader) (int64, error) {
	var n int64
	var err error
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(r)
	} else {
		n, err = io.Copy(writerOnly{c.Conn}, r)
	}
	if err != nil {
		c.noteWriteErr(err)
	}
	return n, err
}

// writerOnly hides every method but Write, so io.Copy cannot loop back
// into ReadFrom.
type writerOnly struct{ io.Writer }

// SetBodyReadDeadline sets the read deadline for a request body and
// remembers it, so that a read that misses it is counted as a body
// timeout (Stats.ClosedBodyTimeout). A zero t clears the deadline.
// ConfigureServer does this for net/http; an HTTP server of another kind
// that applies Timeouts itself calls it.
func (c *Conn) SetBodyReadDeadline(t time.Time) error {
	if t.IsZero() {
		c.bodyDeadline.Store(0)
	} else {
		c.bodyDeadline.Store(t.UnixNano())
	}
	return c.Conn.SetReadDeadline(t)
}
