package redisquota

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/admit"
)

func mustSlots(t *testing.T, cfg SlotsConfig) *Slots {
	t.Helper()
	s, err := NewSlots(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// TestSlotsSharedCapacity: three instances share 5 slots; concurrent
// holders never exceed 5 and every entry is released once.
func TestSlotsSharedCapacity(t *testing.T) {
	srv, _ := startRedis(t)
	var gates []*Slots
	for range 3 {
		gates = append(gates, mustSlots(t, SlotsConfig{Name: "db", Capacity: 5, Client: newClient(t, srv.Addr()), TTL: time.Second,
			Timeout: loadedTimeout})) // the test is about sharing; a 50 ms timeout on a loaded machine refuses breaker_open
	}
	var holding, peak, admitted atomic.Int64
	var wg sync.WaitGroup
	for i := range 12 {
		g := gates[i%3]
		wg.Go(func() {
			for range 40 {
				l, err := g.TryAcquire(context.Background())
				if err != nil {
					var re *admit.RejectedError
					if !errors.As(err, &re) || re.Reason() != admit.ReasonFull {
						t.Errorf("refusal %v, want reason full", err)
						return
					}
					continue
				}
				admitted.Add(1)
				n := holding.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				time.Sleep(200 * time.Microsecond)
				holding.Add(-1)
				if !l.Done(admit.OutcomeOK) {
					t.Error("first Done must release")
				}
			}
		})
	}
	wg.Wait()
	if peak.Load() > 5 {
		t.Fatalf("%d entries held at once with capacity 5", peak.Load())
	}
	if admitted.Load() < 5 {
		t.Fatalf("only %d admitted", admitted.Load())
	}
	var sum uint64
	for _, g := range gates {
		st := g.Stats()
		if st.Held != 0 || st.Admitted != st.Completed["ok"] {
			t.Fatalf("instance stats %+v: every admitted entry must be completed once", st)
		}
		sum += st.Admitted
	}
	if n, err := gates[0].InUse(context.Background()); err != nil || n != 0 {
		t.Fatalf("Redis still holds %d entries (%v)", n, err)
	}
	if sum != uint64(admitted.Load()) {
		t.Fatalf("stats admitted %d, counted %d", sum, admitted.Load())
	}
}

func TestSlotsReleaseExactlyOnce(t *testing.T) {
	_, c := startRedis(t)
	s := mustSlots(t, SlotsConfig{Name: "once", Capacity: 2, Client: c})
	ctx := context.Background()
	a, err := s.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.TryAcquire(ctx); err == nil {
		t.Fatal("third slot granted with capacity 2")
	}
	if !a.Done(admit.OutcomeOK) || a.Done(admit.OutcomeOK) {
		t.Fatal("Done must release once and report false after")
	}
	c2, err := s.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("a's slot was released: %v", err)
	}
	a.Done(admit.OutcomeError) // a second release must not free b's or c2's slot
	if _, err := s.TryAcquire(ctx); err == nil {
		t.Fatal("a repeated Done freed someone else's slot")
	}
	b.Done(admit.OutcomeOK)
	c2.Done(admit.OutcomeOK)
	if st := s.Stats(); st.Completed["ok"] != 3 || st.Completed["error"] != 0 || st.Held != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestSlotsRenewedWhileHeld: an entry held for several TTLs is renewed,
// so its slot is not given away.
func TestSlotsRenewedWhileHeld(t *testing.T) {
	srv, _ := startRedis(t)
	holder := mustSlots(t, SlotsConfig{Name: "renew", Capacity: 1, Client: newClient(t, srv.Addr()), TTL: 150 * time.Millisecond})
	other := mustSlots(t, SlotsConfig{Name: "renew", Capacity: 1, Client: newClient(t, srv.Addr()), TTL: 150 * time.Millisecond})
	l, err := holder.TryAcquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(600 * time.Millisecond)
	for time.Now().Before(deadline) {
		if l2, err := other.TryAcquire(context.Background()); err == nil {
			l2.Done(admit.OutcomeOK)
			t.Fatal("a held, renewed entry expired: the slot was given to another instance")
		}
		time.Sleep(20 * time.Millisecond)
	}
	l.Done(admit.OutcomeOK)
	if _, err := other.TryAcquire(context.Background()); err != nil {
		t.Fatalf("after Done the slot must be free: %v", err)
	}
}

// TestKilledHolderSlotsReturn: a process holding two of three slots is
// killed with SIGKILL; its slots come back within the TTL.
// About 2 s: the killed holder's slots return only after their TTL of one
// second, on Redis's clock.
func TestKilledHolderSlotsReturn(t *testing.T) {
	srv, c := startRedis(t)
	const ttl = 1000 * time.Millisecond // the helper's TTL
	s := mustSlots(t, SlotsConfig{Name: "killme", Capacity: 3, Client: c, TTL: ttl, Timeout: time.Second})
	mine, err := s.TryAcquire(context.Background()) // keeps the set alive through renewals
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Done(admit.OutcomeOK)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+srv.Addr())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "held\n" {
		t.Fatalf("helper said %q", line)
	}
	if _, err := s.TryAcquire(context.Background()); err == nil {
		t.Fatal("the helper holds 2 of 3 slots and we hold 1: a fourth was granted")
	}
	time.Sleep(ttl) // the helper renews: still held after a full TTL
	if _, err := s.TryAcquire(context.Background()); err == nil {
		t.Fatal("the live helper's renewed slots were given away")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = cmd.Wait()
	var got []*SlotPermit
	for len(got) < 2 && time.Since(killed) < 3*ttl {
		if l, err := s.TryAcquire(context.Background()); err == nil {
			got = append(got, l)
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, l := range got {
		l.Done(admit.OutcomeOK)
	}
	if len(got) < 2 {
		t.Fatalf("only %d of the killed holder's 2 slots came back within %v", len(got), 3*ttl)
	}
	if took := time.Since(killed); took > ttl+ttl/2 {
		t.Fatalf("slots came back %v after the kill, want within the TTL %v (plus slack)", took, ttl)
	}
}

func TestSlotsRedisDownFailsClosed(t *testing.T) {
	s := mustSlots(t, SlotsConfig{Name: "down", Capacity: 3, Client: newClient(t, deadAddr(t))})
	start := time.Now()
	_, err := s.TryAcquire(context.Background())
	var re *admit.RejectedError
	if !errors.As(err, &re) || re.Reason() != admit.ReasonBreakerOpen {
		t.Fatalf("got %v, want breaker_open", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("refusal took %v", d)
	}
	if s.Stats().Held != 0 {
		t.Fatal("a refused member is still tracked")
	}
	for range DefaultBreakerFailures {
		_, _ = s.TryAcquire(context.Background())
	}
	if st := s.Stats(); st.Breaker != "open" || st.Rejected["breaker_open"] != DefaultBreakerFailures+1 {
		t.Fatalf("after %d failures: %+v, want the breaker open", DefaultBreakerFailures+1, st)
	}
}

func TestSlotsClose(t *testing.T) {
	_, c := startRedis(t)
	s, err := NewSlots(SlotsConfig{Name: "closing", Capacity: 1, Client: c})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s.Close()
	_, err = s.TryAcquire(context.Background())
	var re *admit.RejectedError
	if !errors.As(err, &re) || re.Reason() != admit.ReasonClosed || !errors.Is(err, admit.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	for _, cfg := range []SlotsConfig{{}, {Client: c}, {Client: c, Capacity: 1, TTL: time.Millisecond}, {Client: c, Capacity: 1, Name: "x y"}} {
		if _, err := NewSlots(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewSlots(%+v): %v", cfg, err)
		}
	}
}
