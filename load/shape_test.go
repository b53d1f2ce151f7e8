package load

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestConstantShape(t *testing.T) {
	s := mustShape(t, 100, time.Second)
	if got := s.Count(); got != 100 {
		t.Fatalf("Count = %d, want 100", got)
	}
	for _, i := range []int64{0, 1, 50, 99} {
		want := time.Duration(i) * 10 * time.Millisecond
		if got := s.At(i); absDur(got-want) > time.Microsecond {
			t.Errorf("At(%d) = %v, want %v", i, got, want)
		}
	}
	if s.MeanRate() != 100 {
		t.Errorf("MeanRate = %v", s.MeanRate())
	}
}

func TestRampShape(t *testing.T) {
	// 0 -> 200 req/s over 2 s: 200 arrivals; arrival i is due at t with
	// 50 t^2 = i, so t = sqrt(i/50).
	s, err := Ramp(0, 200, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Count(); got != 200 {
		t.Fatalf("Count = %d, want 200", got)
	}
	for _, i := range []int64{1, 50, 199} {
		want := time.Duration(math.Sqrt(float64(i)/50) * float64(time.Second))
		if got := s.At(i); absDur(got-want) > time.Microsecond {
			t.Errorf("At(%d) = %v, want %v", i, got, want)
		}
	}
	// Arrivals are in order.
	prev := time.Duration(-1)
	for i := range s.Count() {
		at := s.At(i)
		if at < prev {
			t.Fatalf("At(%d) = %v < At(%d) = %v", i, at, i-1, prev)
		}
		prev = at
	}
	// A falling ramp schedules the same number, front-loaded.
	down, _ := Ramp(200, 0, 2*time.Second)
	if down.Count() != 200 || down.At(100) >= time.Second {
		t.Errorf("falling ramp: count %d, At(100) = %v", down.Count(), down.At(100))
	}
}

func TestSteppedShape(t *testing.T) {
	s, err := Stepped([]float64{10, 100}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Count(); got != 110 {
		t.Fatalf("Count = %d, want 110", got)
	}
	// 10 arrivals in the first second, then every 10 ms.
	if got := s.At(9); got != 900*time.Millisecond {
		t.Errorf("At(9) = %v", got)
	}
	if got := s.At(10); got != time.Second {
		t.Errorf("At(10) = %v", got)
	}
	if got := s.At(11); absDur(got-1010*time.Millisecond) > time.Microsecond {
		t.Errorf("At(11) = %v", got)
	}
}

func TestBadShapes(t *testing.T) {
	for name, f := range map[string]func() (Shape, error){
		"zero rate":     func() (Shape, error) { return Constant(0, time.Second) },
		"negative rate": func() (Shape, error) { return Constant(-1, time.Second) },
		"NaN rate":      func() (Shape, error) { return Constant(math.NaN(), time.Second) },
		"zero duration": func() (Shape, error) { return Constant(10, 0) },
		"no steps":      func() (Shape, error) { return Stepped(nil, time.Second) },
		"zero step":     func() (Shape, error) { return Stepped([]float64{1, 0}, time.Second) },
		"flat ramp":     func() (Shape, error) { return Ramp(0, 0, time.Second) },
	} {
		if _, err := f(); !errors.Is(err, ErrBadShape) {
			t.Errorf("%s: err = %v, want ErrBadShape", name, err)
		}
	}
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
