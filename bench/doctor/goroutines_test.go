// Package doctor_test compares doctor's goroutine-dump reader with
// github.com/maruel/panicparse/v2, a general stack-trace parser, on the
// same dump in one benchmark run. It lives in the bench module so the main
// module does not depend on the peer.
package doctor_test

import (
	"bytes"
	"context"
	"io"
	"runtime"
	"runtime/pprof"
	"sync"
	"testing"

	"github.com/maruel/panicparse/v2/stack"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/doctor"
)

// dump captures a real goroutine dump (debug=2) of a process with about a
// thousand goroutines: callers queued at a gate, goroutines on a mutex and
// on channels.
func dump(b *testing.B) []byte {
	b.Helper()
	g, err := admit.New(admit.Config{Name: "disk", Capacity: 1, MaxWaiters: 1000, MaxWait: -1})
	if err != nil {
		b.Fatal(err)
	}
	held, err := g.TryAcquire()
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	mu.Lock()
	ch := make(chan struct{})
	var wg sync.WaitGroup
	n := 0
	for range 400 {
		wg.Go(func() {
			if p, err := g.Acquire(ctx); err == nil {
				p.Done(admit.OutcomeOK)
			}
		})
		wg.Go(func() { mu.Lock(); n++; mu.Unlock() })
	}
	for range 200 {
		wg.Go(func() { <-ch })
	}
	for g.Stats().Waiting < 400 {
		runtime.Gosched()
	}
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 2); err != nil {
		b.Fatal(err)
	}
	cancel()
	mu.Unlock()
	close(ch)
	wg.Wait()
	held.Done(admit.OutcomeOK)
	return buf.Bytes()
}

func BenchmarkGoroutineDump(b *testing.B) {
	data := dump(b)
	b.Logf("dump: %d bytes", len(data))
	b.Run("sluice-doctor", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			s, err := doctor.ParseGoroutines(bytes.NewReader(data))
			if err != nil || s.Total < 1000 {
				b.Fatal(err, s)
			}
		}
	})
	b.Run("panicparse", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		opts := stack.DefaultOpts()
		opts.GuessPaths = false // no file system look-ups: parsing only
		opts.AnalyzeSources = false
		for b.Loop() {
			snap, _, err := stack.ScanSnapshot(bytes.NewReader(data), io.Discard, opts)
			if err != nil && err != io.EOF || snap == nil || len(snap.Goroutines) < 1000 {
				b.Fatal(err)
			}
		}
	})
}
