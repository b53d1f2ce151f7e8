//go:build linux

package admit_test

import (
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/failsafe-go/failsafe-go/bulkhead"
	"github.com/sluicehq/sluice/admit"
	"golang.org/x/sync/semaphore"
)

// BenchmarkSerialCPU runs the serial rows again but also reports the CPU
// time the benchmark's own thread spent per operation (cpu-ns/op), read
// from CLOCK_THREAD_CPUTIME_ID. On a machine shared with other work,
// wall-clock ns/op counts the time the thread waited for a core; CPU time
// does not, so the ratios between rows stay meaningful.
func BenchmarkSerialCPU(b *testing.B) {
	rows := []struct {
		name string
		op   func() func()
	}{
		{"sluice/timed", func() func() {
			g := newGate(b, admit.Config{Capacity: slots})
			return func() { p, _ := g.TryAcquire(); p.Done(admit.OutcomeOK) }
		}},
		{"sluice/untimed", func() func() {
			g := newGate(b, admit.Config{Capacity: slots, NoTiming: true})
			return func() { p, _ := g.TryAcquire(); p.Done(admit.OutcomeOK) }
		}},
		{"xsync", func() func() {
			s := semaphore.NewWeighted(slots)
			return func() { s.TryAcquire(1); s.Release(1) }
		}},
		{"failsafe/bulkhead", func() func() {
			bh := bulkhead.New[any](slots)
			return func() { bh.TryAcquirePermit(); bh.ReleasePermit() }
		}},
		{"floor/cas+add", func() func() {
			var state atomic.Int64
			return func() {
				if s := state.Load(); s < slots && state.CompareAndSwap(s, s+1) {
					state.Add(-1)
				}
			}
		}},
	}
	for _, r := range rows {
		b.Run(r.name, func(b *testing.B) {
			op := r.op()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ReportAllocs()
			start := threadCPU()
			for b.Loop() {
				op()
			}
			b.ReportMetric(float64(threadCPU()-start)/float64(b.N), "cpu-ns/op")
		})
	}
}

// threadCPU is the CPU time this OS thread has used.
func threadCPU() time.Duration {
	var ts syscall.Timespec
	const clockThreadCPUTime = 3
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano())
}
