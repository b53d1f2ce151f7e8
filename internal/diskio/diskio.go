// Package diskio reads files whose reads may block for milliseconds (a
// disk, a network or FUSE filesystem) without stalling the goroutines
// that share the reader's P.
//
// # Why
//
// A system call made through package syscall keeps its P (the runtime's
// right to run Go code) while it runs; only the runtime's monitor thread
// (sysmon) hands that P to another thread, once it has seen the call
// blocked on two of its wake-ups. Its wake-ups slow from every 20 µs to
// every 10 ms while it finds nothing to do, so a read that blocks on a
// slow disk can hold the P, and every goroutine waiting for it, for up to
// 20 ms. With GOMAXPROCS=1 (a server pinned to one core, or a container
// with one CPU) that stops the whole process: measured with `sluice serve`
// on one core in front of a disk that takes 20 ms per read, at 50 times
// the disk's capacity from 6,000 connections, the core sat half idle
// while requests queued, and goodput fell to 0.5 of the disk's
// capacity with a p99 of seconds (bench/scripts/serve-cliff.sh,
// docs/bench/serve.md).
//
// # What it does
//
// Read first asks for the bytes only if they are in the page cache
// (preadv2 with RWF_NOWAIT, a raw system call that cannot block), which
// answers a warm file at the cost of an ordinary read. When the disk must
// be read (EAGAIN, or a filesystem that does not support the flag), it
// makes the read the way the runtime makes the calls it knows will
// block: the P is handed to another thread before the call
// (runtime.entersyscallblock), so the other goroutines run while the
// read waits, and the reader queues for a P again when it returns. That
// costs a thread wake-up per blocking read, microseconds against the
// milliseconds the disk takes.
//
// The two runtime functions are reached with go:linkname; the runtime
// keeps both, with their signatures, for callers outside it
// (go.dev/issue/67401). Elsewhere than Linux, and for anything that is
// not an *os.File, Read is the file's own Read.
package diskio

import (
	"io"
	"os"
)

// Read reads up to len(p) bytes from f's current offset, as f.Read does:
// 0 and io.EOF at the end of the file. A read answered from the page
// cache may come back shorter than the bytes that remain (only what was
// cached); the next Read goes on from there.
func Read(f *os.File, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, err := read(f, p)
	if n == 0 && err == nil {
		return 0, io.EOF
	}
	return n, err
}

// Reader reads File through Read.
type Reader struct{ File *os.File }

// Read implements io.Reader.
func (r Reader) Read(p []byte) (int, error) { return Read(r.File, p) }
