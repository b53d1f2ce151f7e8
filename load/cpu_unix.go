//go:build unix

package load

import (
	"syscall"
	"time"
)

// processCPU is the user + system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// fineSleep is the stretch below which the pacer sleeps with nanosleep.
const fineSleep = 2 * time.Millisecond

// preciseSleep blocks the calling thread for d in the kernel, which wakes
// it within tens of microseconds, unlike a Go timer below a millisecond.
func preciseSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil)
}
