//go:build linux

package diskio

import (
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

//go:linkname entersyscallblock runtime.entersyscallblock
func entersyscallblock()

//go:linkname exitsyscall runtime.exitsyscall
func exitsyscall()

// readBlocking is read(2) with the P handed off first. Nothing between
// the two runtime calls may grow the stack or touch the heap: hence
// nosplit, and a raw call that is assembly.
//
//go:nosplit
//go:norace
func readBlocking(fd uintptr, p unsafe.Pointer, n uintptr) (uintptr, syscall.Errno) {
	entersyscallblock()
	r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(p), n)
	exitsyscall()
	return r, e
}

// longBits is the width of the kernel's long: a file offset goes to
// preadv2 as two longs, low and high.
const longBits = 32 << (^uintptr(0) >> 63)

// readCached is preadv2(fd, p, at the current offset, RWF_NOWAIT): the
// bytes the page cache holds, or EAGAIN when the disk would be read. It
// cannot block, so it is a raw call.
func readCached(fd uintptr, p []byte) (uintptr, syscall.Errno) {
	iov := unix.Iovec{Base: &p[0]}
	iov.SetLen(len(p))
	off := uint64(1<<64 - 1) // -1: the file's own offset, moved by the read
	lo, hi := uintptr(off), uintptr(off>>(longBits/2)>>(longBits/2))
	r, _, e := syscall.RawSyscall6(unix.SYS_PREADV2, fd, uintptr(unsafe.Pointer(&iov)), 1, lo, hi, unix.RWF_NOWAIT)
	return r, e
}

func read(f *os.File, p []byte) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return f.Read(p)
	}
	var n uintptr
	var errno syscall.Errno
	err = rc.Read(func(fd uintptr) bool {
		for {
			n, errno = readCached(fd, p)
			if errno == syscall.EINTR {
				continue
			}
			if errno == 0 || !needsDisk(errno) {
				return true
			}
			break
		}
		for {
			n, errno = readBlocking(fd, unsafe.Pointer(&p[0]), uintptr(len(p)))
			switch errno {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN: // a non-blocking descriptor: wait in the poller
				return false
			}
			return true
		}
	})
	if err != nil { // the file was closed: let os say so, as f.Read would
		return f.Read(p)
	}
	if errno != 0 {
		return 0, &os.PathError{Op: "read", Path: f.Name(), Err: errno}
	}
	return int(n), nil
}

// needsDisk reports whether a RWF_NOWAIT read's error means "read it the
// ordinary way": the data is not cached (EAGAIN), or the kernel or the
// filesystem does not take the flag (EOPNOTSUPP, ENOSYS, EINVAL).
func needsDisk(e syscall.Errno) bool {
	switch e {
	case syscall.EAGAIN, syscall.EOPNOTSUPP, syscall.ENOSYS, syscall.EINVAL:
		return true
	}
	return false
}
