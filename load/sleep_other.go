//go:build !(linux || freebsd || netbsd || openbsd || dragonfly)

package load

import "time"

// Without a nanosleep in package syscall (macOS among others) the pacer
// keeps to Go timers throughout: a sparse timetable's arrivals may come
// up to a timer's granularity late, which the report's pacer lag shows.
const fineSleep = 0

func preciseSleep(d time.Duration) { time.Sleep(d) }
