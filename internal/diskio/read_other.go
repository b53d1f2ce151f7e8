//go:build !linux

package diskio

import "os"

func read(f *os.File, p []byte) (int, error) { return f.Read(p) }
