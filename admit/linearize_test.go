package admit_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/sluicehq/sluice/admit"
)

// The linearizability check runs a gate from several goroutines at once,
// records every call with the logical time it started and returned, and
// asks porcupine whether some order of the calls, each taking effect at
// one instant between its start and its return, explains every result
// against a sequential model of the gate. Unlike the property test, which
// settles every goroutine between steps, nothing here is serialised: Stats
// snapshots race with admissions, refusals, releases, capacity changes and
// Close, so a snapshot that shows half of an operation, a counter read out
// of order, or a decision that no order explains, fails the check.

var linearizeHistories = flag.Int("admit.histories", 1000, "histories the linearizability check records and checks")

const linClients = 4

// linKinds are the kinds of the gates under check.
var linKinds = []string{"a", "b"}

// A linInput is one call.
type linInput struct {
	op       string // "try", "acquire", "done", "setcap", "close", "stats"
	kind     admit.Kind
	weight   int64
	outcome  admit.Outcome
	repeat   bool // done: the caller already ended this permit once
	canceled bool // acquire: with a context that is already canceled
	capacity int64
}

// A linOutput is what the call returned.
type linOutput struct {
	admitted bool
	reason   admit.Reason
	stats    linSnapshot
}

// linSnapshot is the part of Stats the model predicts.
type linSnapshot struct {
	offered, admitted [2]uint64
	rejected          [2][admit.NumReasons]uint64
	completed         [2][admit.NumOutcomes]uint64
	inflight          [2]int64
	inUse, waiting    int64
	misuse            uint64
}

func snapshotOf(s admit.Stats) linSnapshot {
	var out linSnapshot
	for i, k := range s.Kinds {
		out.offered[i], out.admitted[i] = k.Offered, k.Admitted
		out.rejected[i] = k.Rejected
		out.completed[i] = k.Completed
		out.inflight[i] = k.Inflight
	}
	out.inUse, out.waiting, out.misuse = s.InUse, s.Waiting, s.Misuse
	return out
}

// linState is the sequential model of a gate without a queue.
type linState struct {
	capacity int64
	closed   bool
	snap     linSnapshot
}

func (s linState) decide(kind admit.Kind, n int64, canceled bool) (linState, bool, admit.Reason) {
	s.snap.offered[kind]++
	var r admit.Reason
	switch {
	case canceled:
		r = admit.ReasonCanceled
	case s.closed:
		r = admit.ReasonClosed
	case s.snap.inUse+n > s.capacity:
		r = admit.ReasonFull
	default:
		s.snap.admitted[kind]++
		s.snap.inflight[kind]++
		s.snap.inUse += n
		return s, true, admit.ReasonNone
	}
	s.snap.rejected[kind][r]++
	return s, false, r
}

var linModel = porcupine.Model{
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(linState), input.(linInput), output.(linOutput)
		switch in.op {
		case "try", "acquire":
			next, ok, r := s.decide(in.kind, in.weight, in.canceled)
			return ok == out.admitted && r == out.reason, next
		case "done":
			if in.repeat {
				s.snap.misuse++
				return true, s
			}
			if s.snap.inUse < in.weight {
				return false, s
			}
			s.snap.inUse -= in.weight
			s.snap.inflight[in.kind]--
			s.snap.completed[in.kind][in.outcome]++
			return true, s
		case "setcap":
			if !s.closed {
				s.capacity = in.capacity
			}
			return true, s
		case "close":
			s.closed = true
			return true, s
		case "stats":
			return out.stats == s.snap, s
		}
		panic("unknown op " + in.op)
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(linInput), output.(linOutput)
		switch in.op {
		case "stats":
			return fmt.Sprintf("stats -> %+v", out.stats)
		case "done":
			return fmt.Sprintf("done(kind %d, n %d, %s, repeat %v)", in.kind, in.weight, in.outcome, in.repeat)
		case "setcap":
			return fmt.Sprintf("setcap(%d)", in.capacity)
		case "close":
			return "close"
		}
		return fmt.Sprintf("%s(kind %d, n %d, canceled %v) -> admitted %v %s", in.op, in.kind, in.weight, in.canceled, out.admitted, out.reason)
	},
}

// linHeld is a permit a client holds, and whether it has ended it.
type linHeld struct {
	p    admit.Permit
	kind admit.Kind
	n    int64
	done bool
}

// recordHistory runs linClients goroutines of ops calls each against g
// and returns the history.
func recordHistory(g *admit.Gate, capacity int64, ops int, seed uint64) []porcupine.Operation {
	var clock atomic.Int64
	var mu sync.Mutex
	var history []porcupine.Operation
	record := func(client int, in linInput, call int64, out linOutput) {
		ret := clock.Add(1)
		mu.Lock()
		history = append(history, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
		mu.Unlock()
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	var wg sync.WaitGroup
	start := make(chan struct{})
	for c := range linClients {
		rng := rand.New(rand.NewPCG(seed, uint64(c)))
		wg.Go(func() {
			var held []*linHeld
			<-start
			for range ops {
				switch x := rng.IntN(100); {
				case x < 30:
					in := linInput{op: "try", kind: admit.Kind(rng.IntN(2)), weight: 1 + rng.Int64N(2)}
					if rng.IntN(3) == 0 {
						in.kind, in.weight = 0, 1 // the one-CAS fast path
					}
					h := &linHeld{kind: in.kind, n: in.weight}
					var err error
					call := clock.Add(1)
					if in.kind == 0 && in.weight == 1 {
						h.p, err = g.TryAcquire()
					} else {
						h.p, err = g.TryAcquireFor(admit.Request{Kind: in.kind, Weight: in.weight})
					}
					record(c, in, call, outputOf(err))
					if err == nil {
						held = append(held, h)
					}
				case x < 40:
					in := linInput{op: "acquire", kind: admit.Kind(rng.IntN(2)), weight: 1 + rng.Int64N(2), canceled: rng.IntN(4) == 0}
					ctx := context.Background()
					if in.canceled {
						ctx = canceled
					}
					h := &linHeld{kind: in.kind, n: in.weight}
					var err error
					call := clock.Add(1)
					h.p, err = g.AcquireFor(ctx, admit.Request{Kind: in.kind, Weight: in.weight})
					record(c, in, call, outputOf(err))
					if err == nil {
						held = append(held, h)
					}
				case x < 75:
					if len(held) == 0 {
						continue
					}
					i := rng.IntN(len(held))
					h := held[i]
					in := linInput{op: "done", kind: h.kind, weight: h.n, outcome: admit.Outcome(rng.IntN(admit.NumOutcomes)), repeat: h.done}
					if rng.IntN(3) > 0 {
						in.outcome = admit.OutcomeOK
					}
					call := clock.Add(1)
					h.p.Done(in.outcome)
					record(c, in, call, linOutput{})
					h.done = true
				case x < 80:
					in := linInput{op: "setcap", capacity: rng.Int64N(capacity + 2)}
					call := clock.Add(1)
					if err := g.SetCapacity(in.capacity); err != nil {
						panic(err)
					}
					record(c, in, call, linOutput{})
				case x < 81:
					call := clock.Add(1)
					g.Close()
					record(c, linInput{op: "close"}, call, linOutput{})
				default:
					call := clock.Add(1)
					s := g.Stats()
					record(c, linInput{op: "stats"}, call, linOutput{stats: snapshotOf(s)})
				}
			}
			for _, h := range held { // end what is left, on the record
				if !h.done {
					call := clock.Add(1)
					h.p.Done(admit.OutcomeOK)
					record(c, linInput{op: "done", kind: h.kind, weight: h.n}, call, linOutput{})
				}
			}
		})
	}
	close(start)
	wg.Wait()
	return history
}

func outputOf(err error) linOutput {
	if err == nil {
		return linOutput{admitted: true}
	}
	var rej *admit.RejectedError
	if !errors.As(err, &rej) {
		panic(fmt.Sprintf("not a refusal: %v", err))
	}
	return linOutput{reason: rej.Reason()}
}

// TestLinearizable records thousands of short concurrent histories (on a
// gate without a queue, so every call decides at once) and checks each
// against the sequential model: decisions, releases, capacity changes,
// Close and whole Stats snapshots. Gates with and without timing and
// observers take different paths through admission and release, so each
// history draws its configuration.
// Seconds: a thousand histories (250 with -short), each searched by
// porcupine.
func TestLinearizable(t *testing.T) {
	histories := *linearizeHistories
	if testing.Short() {
		histories /= 4
	}
	for i := range histories {
		seed := rand.Uint64()
		capacity := 1 + int64(i%3)
		cfg := admit.Config{Capacity: capacity, Kinds: linKinds}
		switch i % 4 {
		case 0:
			cfg.NoTiming = true // the bare fast path
		case 1:
			cfg.SampleEvery = 1 // every permit timed
		case 2:
			cfg.Observer = admit.Observers(&countingObserver{})
		}
		g := mustGate(t, cfg)
		history := recordHistory(g, capacity, 24, seed)
		model := linModel
		model.Init = func() any { return linState{capacity: capacity} }
		res, info := porcupine.CheckOperationsVerbose(model, history, 20*time.Second)
		switch res {
		case porcupine.Illegal:
			t.Errorf("history %d (capacity %d, config %d, seed %d) is not linearizable", i, capacity, i%4, seed)
			if path := writeVisualization(t, model, info); path != "" {
				t.Logf("visualization: %s", path)
			}
			for _, op := range history {
				t.Logf("client %d [%d,%d] %s", op.ClientId, op.Call, op.Return, model.DescribeOperation(op.Input, op.Output))
			}
			return
		case porcupine.Unknown:
			t.Logf("history %d: checker timed out (counted as passed)", i)
		}
		if s := g.Stats(); s.InUse != 0 || s.Inflight != 0 {
			t.Fatalf("history %d: after every permit ended, in use %d inflight %d", i, s.InUse, s.Inflight)
		}
	}
}

// writeVisualization saves porcupine's HTML view of a failing history in
// the test's temporary directory (never in the working tree).
func writeVisualization(t *testing.T, model porcupine.Model, info porcupine.LinearizationInfo) string {
	path := t.TempDir() + "/linearizability.html"
	if err := porcupine.VisualizePath(model, info, path); err != nil {
		t.Logf("visualization: %v", err)
		return ""
	}
	return path
}

type countingObserver struct{ admissions, completions atomic.Int64 }

func (o *countingObserver) ObserveAdmission(admit.AdmissionEvent)   { o.admissions.Add(1) }
func (o *countingObserver) ObserveCompletion(admit.CompletionEvent) { o.completions.Add(1) }
