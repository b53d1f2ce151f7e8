//go:build !linux

package static

import "io/fs"

// identOf returns the mode only: other platforms are not wired for the inode or
// change time through fs.FileInfo, so revalidation there relies on size,
// modification time and mode.
func identOf(fi fs.FileInfo) fileIdent { return fileIdent{mode: fi.Mode()} }

// realPath is not available here: the dotfile rule then applies to the
// requested name only.
func realPath(fs.File) (string, bool) { return "", false }

func appendRealPath(dst []byte, _ fs.File) ([]byte, bool) { return dst, false }
