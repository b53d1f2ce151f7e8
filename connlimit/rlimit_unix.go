//go:build unix

package connlimit

import "syscall"

// softNoFile returns the process's current soft RLIMIT_NOFILE. Since Go
// 1.19 the os package raises the soft limit to the hard limit during
// program initialisation, so this reads the raised value.
func softNoFile() (uint64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	return uint64(rl.Cur), nil
}
