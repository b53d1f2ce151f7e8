package load

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestConfigSizeBounds: every size past its bound is refused with
// ErrConfig before anything is allocated or sent (the values would ask for
// tens of gigabytes, or panic in make, if they reached an allocation).
func TestConfigSizeBounds(t *testing.T) {
	tg := []Target{{URL: "http://127.0.0.1:1/"}}
	sh := func(rate float64, d time.Duration) Shape {
		s, err := Constant(rate, d)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"queue depth", Config{Targets: tg, Shape: sh(10, time.Second), QueueDepth: 99999999999999}, "queue depth"},
		{"derived queue depth", Config{Targets: tg, Shape: sh(100000, time.Second), P99Budget: 5 * time.Minute}, "queue depth"},
		{"workers", Config{Targets: tg, Shape: sh(10, time.Second), Workers: 100_000_000}, "workers"},
		{"concurrency", Config{Targets: tg, Concurrency: 10_000_000}, "concurrency"},
		{"p99 budget", Config{Targets: tg, Shape: sh(10, time.Second), P99Budget: 1000 * time.Hour}, "p99 budget"},
		{"windows", Config{Targets: tg, Shape: sh(10, time.Second), Windows: 100_000_000}, "windows"},
		{"duration", Config{Targets: tg, Concurrency: 1, Duration: 1000 * time.Hour}, "duration"},
		{"run length", Config{Targets: tg, Concurrency: 1, Duration: 20 * time.Hour, Windows: 100}, "windows × duration"},
		{"body", Config{Targets: []Target{{URL: "http://127.0.0.1:1/", Body: make([]byte, MaxBodyBytes+1)}}, Concurrency: 1}, "body"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := RunStep(context.Background(), c.cfg)
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "at most") {
				t.Fatalf("err %v, want ErrConfig naming %q and its bound", err, c.want)
			}
		})
	}
	for _, r := range []float64{MaxRate + 1, 1e308} {
		if _, err := Constant(r, time.Second); !errors.Is(err, ErrBadShape) {
			t.Errorf("rate %v: err %v, want ErrBadShape", r, err)
		}
	}
	ones := make([]float64, MaxSegments+1)
	for i := range ones {
		ones[i] = 1
	}
	if _, err := Stepped(ones, time.Hour); !errors.Is(err, ErrBadShape) || !strings.Contains(err.Error(), "at most") {
		t.Errorf("%d steps accepted", MaxSegments+1)
	}
}
