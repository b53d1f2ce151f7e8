//go:build unix && !(solaris || illumos || aix)

package rawsock

import (
	"syscall"
	"unsafe"
)

// Read is read(2) on a non-blocking socket as a raw system call: n and
// nil, or -1 and the error (syscall.EAGAIN when the socket is empty).
func Read(fd int, p []byte) (int, error) {
	var ptr unsafe.Pointer
	if len(p) > 0 {
		ptr = unsafe.Pointer(&p[0])
	}
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(ptr), uintptr(len(p)))
	if e != 0 {
		return -1, e
	}
	return int(n), nil
}

// WriteNow writes what of b a non-blocking socket takes at once, as a
// raw system call, and reports how much: 0 when the socket is full or
// the write failed, so that the caller's net.Conn Write then waits for
// room under its deadline, or reports the error.
func WriteNow(fd int, b []byte) int {
	if len(b) == 0 {
		return 0
	}
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return 0
		}
		return int(n)
	}
}

// Quiet reports whether a non-blocking socket holds nothing to read and
// has not ended: one recv(MSG_PEEK|MSG_DONTWAIT) as a raw system call,
// which finds nothing (EAGAIN). A byte waiting, an end of file or an
// error is not quiet.
func Quiet(fd int) bool {
	var b [1]byte
	for {
		n, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), 1, syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		return int(n) <= 0 && e == syscall.EAGAIN
	}
}
