//go:build linux

package static

import (
	"io/fs"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"
)

// identOf returns what, beyond size and modification time, tells two
// versions of a file apart: device and inode (a file replaced by
// rename), change time (any write, chmod or utimes, even one that
// restores the modification time), and the mode (permissions).
func identOf(fi fs.FileInfo) fileIdent {
	id := fileIdent{mode: fi.Mode()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.dev, id.ino = uint64(st.Dev), uint64(st.Ino)
		id.ctime = int64(st.Ctim.Sec)*1e9 + int64(st.Ctim.Nsec)
	}
	return id
}

// realPath returns the path the kernel holds for an open file (through
// /proc/self/fd), every symbolic link resolved, or false when it cannot
// be known (not an *os.File, no /proc).
func realPath(f fs.File) (string, bool) {
	var buf [4096]byte
	p, ok := appendRealPath(buf[:0], f)
	return string(p), ok
}

// appendRealPath is realPath into dst's spare capacity, without
// allocating (it runs for every file a cold read opens): the descriptor
// from Fd (a regular file is never in the poller, so Fd changes
// nothing), readlinkat on a path built in a stack buffer. A path that
// does not fit in dst's capacity is false.
func appendRealPath(dst []byte, f fs.File) ([]byte, bool) {
	df, ok := f.(interface{ Fd() uintptr })
	if !ok || cap(dst)-len(dst) < 2 {
		return dst, false
	}
	var name [32]byte
	b := append(name[:0], "/proc/self/fd/"...)
	b = strconv.AppendUint(b, uint64(df.Fd()), 10)
	b = append(b, 0)
	out := dst[len(dst):cap(dst)]
	atFDCWD := -100
	n, _, errno := syscall.Syscall6(syscall.SYS_READLINKAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(&b[0])),
		uintptr(unsafe.Pointer(&out[0])), uintptr(len(out)), 0, 0)
	runtime.KeepAlive(f)
	if errno != 0 || int(n) <= 0 || int(n) >= len(out) || out[0] != '/' {
		return dst, false
	}
	return dst[:len(dst)+int(n)], true
}
