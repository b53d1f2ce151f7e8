//go:build linux

package static

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
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
	sc, ok := f.(syscall.Conn)
	if !ok {
		return "", false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return "", false
	}
	var p string
	var rerr error
	if err := raw.Control(func(fd uintptr) {
		p, rerr = os.Readlink("/proc/self/fd/" + strconv.FormatUint(uint64(fd), 10))
	}); err != nil || rerr != nil || !filepath.IsAbs(p) {
		return "", false
	}
	return p, true
}
