package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/limit"
	"github.com/sluicehq/sluice/server"
)

// /state shows the oldest waiter's age, per-class counts and the
// adaptive limit that moves the gate.
func TestStateShowsQueueAgeClassesAndLimits(t *testing.T) {
	a, err := limit.New(limit.Config{Law: &limit.AIMD{}, Min: 1, Max: 8, SLO: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f := start(t, admit.Config{Capacity: 1, MaxWaiters: 4, MaxWait: 10 * time.Second},
		func(c *server.Config) { c.Limits = []*limit.Adaptive{a} })
	if err := a.Attach(f.gate); err != nil {
		t.Fatal(err)
	}
	if err := f.gate.SetCapacity(1); err != nil {
		t.Fatal(err)
	}
	held, err := f.gate.TryAcquire()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := f.gate.AcquireFor(ctx, admit.Request{Class: admit.ClassSheddable})
		done <- err
	}()
	for f.gate.Queued() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	var st server.State
	r := f.mustGet(t, f.admin+"/state")
	if err := json.Unmarshal([]byte(r.body), &st); err != nil {
		t.Fatalf("/state %q: %v", r.body, err)
	}
	gs := st.Gates[0]
	if gs.OldestWaitSeconds < 0.02 {
		t.Errorf("oldest wait %v, want at least 20ms", gs.OldestWaitSeconds)
	}
	if c, ok := gs.Classes["sheddable"]; !ok || c.Waiting != 1 || gs.Classes["critical"].Admitted != 1 {
		t.Errorf("classes %+v", gs.Classes)
	}
	if len(st.Limits) != 1 || st.Limits[0].Gate != "work" || st.Limits[0].Law != "aimd" || st.Limits[0].Limit < 1 || st.Limits[0].CeilingSeconds != 1 {
		t.Errorf("limits %+v", st.Limits)
	}
	for _, key := range []string{`"tail_seconds"`, `"queue_wait_seconds"`, `"budget_seconds"`} {
		if !strings.Contains(r.body, key) {
			t.Errorf("/state lacks the limit's %s: %s", key, r.body)
		}
	}
	cancel()
	if err := <-done; err == nil {
		t.Error("canceled waiter admitted")
	}
	held.Done(admit.OutcomeOK)
}
