//go:build unix

package connlimit

import (
	"syscall"
	"testing"
)

// The real New reads the process's limit as Go left it after raising the
// soft limit at start-up.
func TestNewReadsProcessLimit(t *testing.T) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Skipf("getrlimit: %v", err)
	}
	soft := min(uint64(rl.Cur), fallbackNoFileLimit)
	want := int(soft) - max(DefaultMinReserve, int(soft)/DefaultReserveFraction)
	if want < 1 {
		t.Skipf("soft limit %d too low for a derived limit", soft)
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("the zero Config does not validate: %v", err)
	}
	l, err := New(nil, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if l.MaxConns() != want {
		t.Errorf("MaxConns = %d, want %d from soft limit %d", l.MaxConns(), want, soft)
	}
}
