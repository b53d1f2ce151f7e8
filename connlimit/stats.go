package connlimit

import (
	"errors"
	"net"
	"sync/atomic"
	"syscall"
)

// Reasons a connection is rejected (the "reason" label of
// sluice_connections_rejected_total). The set is closed and small.
const (
	// ReasonMaxConns: MaxConns connections were already open.
	ReasonMaxConns = "max_conns"
)

// Kinds of temporary Accept errors (the "kind" label of
// sluice_accept_errors_total). The set is closed and small.
const (
	// AcceptErrEMFILE: the process is out of file descriptors.
	AcceptErrEMFILE = "emfile"
	// AcceptErrENFILE: the system is out of file descriptors.
	AcceptErrENFILE = "enfile"
	// AcceptErrNoMem: ENOBUFS or ENOMEM, the kernel is short of memory.
	AcceptErrNoMem = "nomem"
	// AcceptErrOther: any other error that reports itself as temporary
	// (ECONNABORTED and the like).
	AcceptErrOther = "other"
)

// errKind indexes the accept-error counters.
type errKind int

const (
	kindEMFILE errKind = iota
	kindENFILE
	kindNoMem
	kindOther
	numErrKinds
)

func (k errKind) String() string {
	switch k {
	case kindEMFILE:
		return AcceptErrEMFILE
	case kindENFILE:
		return AcceptErrENFILE
	case kindNoMem:
		return AcceptErrNoMem
	default:
		return AcceptErrOther
	}
}

// Stats is a snapshot of a Listener's counters. Counters (uint64) only
// grow; gauges (int) go up and down. Maps hold every known label value,
// zero included, so collectors see stable series.
type Stats struct {
	// MaxConns is the limit in force.
	MaxConns int
	// Open is the number of accepted connections not yet closed (gauge).
	Open int
	// Refusing is the number of refused connections still lingering
	// (reply sent, waiting for the client to close; gauge).
	Refusing int
	// Accepted counts connections handed to the caller of Accept.
	Accepted uint64
	// Rejected counts rejected connections by reason (ReasonMaxConns).
	Rejected map[string]uint64
	// BusyWriteErrors counts rejected connections whose busy reply could
	// not be written in full (client gone, write deadline).
	BusyWriteErrors uint64
	// ClosedIdle counts HTTP keep-alive connections that the server
	// closed because they sat idle past IdleTimeout (needs ConnState).
	ClosedIdle uint64
	// ClosedHeaderTimeout counts HTTP connections closed because a
	// request's headers did not arrive within ReadHeaderTimeout
	// (slowloris; needs ConnState).
	ClosedHeaderTimeout uint64
	// ClosedSendTimeout counts connections whose write missed its
	// deadline: a client that stopped reading for SendTimeout (needs
	// ConfigureServer). net/http closes a connection after a failed write.
	ClosedSendTimeout uint64
	// ClosedBodyTimeout counts connections whose request body did not
	// progress for BodyTimeout (needs ConfigureServer); net/http closes
	// them after the reply.
	ClosedBodyTimeout uint64
	// AcceptErrors counts temporary Accept errors by kind (AcceptErr*).
	AcceptErrors map[string]uint64
	// Backoffs counts the pauses taken after temporary Accept errors.
	Backoffs uint64
}

// counters holds the Listener's live counters; every field is atomic so
// the accept path and Conn.Close take no lock.
type counters struct {
	open                atomic.Int64
	refusing            atomic.Int64
	accepted            atomic.Uint64
	rejectedMaxConns    atomic.Uint64
	busyWriteErrors     atomic.Uint64
	closedIdle          atomic.Uint64
	closedHeaderTimeout atomic.Uint64
	closedSendTimeout   atomic.Uint64
	closedBodyTimeout   atomic.Uint64
	acceptErrors        [numErrKinds]atomic.Uint64
	backoffs            atomic.Uint64
}

func (c *counters) snapshot(maxConns int) Stats {
	s := Stats{
		MaxConns:            maxConns,
		Open:                int(c.open.Load()),
		Refusing:            int(c.refusing.Load()),
		Accepted:            c.accepted.Load(),
		Rejected:            map[string]uint64{ReasonMaxConns: c.rejectedMaxConns.Load()},
		BusyWriteErrors:     c.busyWriteErrors.Load(),
		ClosedIdle:          c.closedIdle.Load(),
		ClosedHeaderTimeout: c.closedHeaderTimeout.Load(),
		ClosedSendTimeout:   c.closedSendTimeout.Load(),
		ClosedBodyTimeout:   c.closedBodyTimeout.Load(),
		AcceptErrors:        make(map[string]uint64, numErrKinds),
		Backoffs:            c.backoffs.Load(),
	}
	for k := range numErrKinds {
		s.AcceptErrors[k.String()] = c.acceptErrors[k].Load()
	}
	return s
}

// classifyAcceptError reports whether err from Accept is temporary (the
// listener is still good and a later Accept may succeed) and, if so, its
// kind.
func classifyAcceptError(err error) (kind errKind, temporary bool) {
	switch {
	case errors.Is(err, net.ErrClosed):
		return 0, false
	case errors.Is(err, syscall.EMFILE):
		return kindEMFILE, true
	case errors.Is(err, syscall.ENFILE):
		return kindENFILE, true
	case errors.Is(err, syscall.ENOBUFS), errors.Is(err, syscall.ENOMEM):
		return kindNoMem, true
	case errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.ECONNRESET):
		// A connection reset while in the backlog; the net package
		// normally retries these itself.
		return kindOther, true
	}
	// Temporary is deprecated for general use but remains the contract
	// net/http's accept loop relies on for Accept errors.
	var te interface{ Temporary() bool }
	if errors.As(err, &te) && te.Temporary() {
		return kindOther, true
	}
	return 0, false
}
