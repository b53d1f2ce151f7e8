//go:build !unix

package connlimit

import "errors"

// softNoFile reports that the platform has no RLIMIT_NOFILE; New then
// asks for an explicit MaxConns.
func softNoFile() (uint64, error) {
	return 0, errors.New("no RLIMIT_NOFILE on this platform")
}
