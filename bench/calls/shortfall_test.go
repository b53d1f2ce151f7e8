package calls_test

import (
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sony/gobreaker/v2"
)

// TestGobreakerShortfall records why sluice's breaker is not built on
// gobreaker, by running both on the same traffic: 100 calls, 30 failing
// fast, 30 succeeding slowly (2 s, slow threshold 1 s), 40 fine. Policy:
// open at 50 % failures or at 80 % slow calls, so this upstream should
// stay closed.
//
// gobreaker has one success/failure count, so slowness can only be folded
// into failures: 60 % "failures" trips the 50 % threshold. Its open-state
// refusal is a bare sentinel error with no time left to wait.
func TestGobreakerShortfall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errSlow := errors.New("slow")
		gb := gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
			Interval: time.Minute, Timeout: 5 * time.Second,
			ReadyToTrip: func(c gobreaker.Counts) bool {
				return c.Requests >= 20 && float64(c.TotalFailures)/float64(c.Requests) >= 0.5
			},
		})
		sb, err := breaker.New(breaker.Config{Window: time.Minute, MinCalls: 20, FailureRatio: 0.5,
			SlowCall: time.Second, SlowCallRatio: 0.8, OpenFor: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 100 {
			done, gerr := gb.Allow()
			call, serr := sb.Allow()
			if gerr != nil || serr != nil {
				break
			}
			switch {
			case i%10 < 3:
				done(errors.New("failed"))
				call.Done(breaker.Failure)
			case i%10 < 6:
				time.Sleep(2 * time.Second)
				done(errSlow)
				call.Done(breaker.Success)
			default:
				done(nil)
				call.Done(breaker.Success)
			}
		}
		if s := sb.State(); s != breaker.Closed {
			t.Fatalf("sluice breaker %v, want closed (30 %% failures < 50 %%, 30 %% slow < 80 %%)", s)
		}
		if s := gb.State(); s != gobreaker.StateOpen {
			t.Fatalf("gobreaker %v: expected it to trip on slow calls folded into failures", s)
		}
		_, gerr := gb.Allow()
		if !errors.Is(gerr, gobreaker.ErrOpenState) {
			t.Fatalf("gobreaker open refusal = %v", gerr)
		}
		var re *admit.RejectedError
		if errors.As(gerr, &re) {
			t.Fatal("gobreaker's refusal unexpectedly carries a RetryAfter")
		}
		t.Logf("same traffic: sluice %v, gobreaker %v (refusal %q, no wait hint)", sb.State(), gb.State(), gerr)
	})
}

// TestRawServerAllocatesNothing backs the "raw" benchmark rows: a request
// and its answer over a plain connection to rawServer allocate nothing in
// this process, so the allocations those rows count are the HTTP
// client's alone.
func TestRawServerAllocatesNothing(t *testing.T) {
	addr := strings.TrimSuffix(strings.TrimPrefix(rawServer(t), "http://"), "/x")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := []byte("GET /x HTTP/1.1\r\nHost: up\r\nRequest-Timeout: 12.5\r\n\r\n")
	want := len("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok")
	buf := make([]byte, 256)
	allocs := testing.AllocsPerRun(500, func() {
		if _, err := c.Write(req); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf[:want]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per request and answer, want 0", allocs)
	}
	if !strings.HasSuffix(string(buf[:want]), "\r\n\r\nok") {
		t.Fatalf("answer %q", buf[:want])
	}
}
