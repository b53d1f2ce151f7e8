//go:build linux || freebsd || netbsd || openbsd || dragonfly

package load

import (
	"syscall"
	"time"
)

// fineSleep is the stretch below which the pacer sleeps with nanosleep.
const fineSleep = 2 * time.Millisecond

// preciseSleep blocks the calling thread for d in the kernel, which wakes
// it within tens of microseconds, unlike a Go timer below a millisecond.
func preciseSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil)
}
