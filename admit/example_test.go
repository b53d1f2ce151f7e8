package admit_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/admit"
)

// A gate at the point of cost: only the disk read takes a slot.
func ExampleGate() {
	disk, err := admit.New(admit.Config{Name: "disk", Capacity: 2, Kinds: []string{"read"}})
	if err != nil {
		panic(err)
	}
	cache := map[string]string{"hot.txt": "cached"}
	serve := func(name string) string {
		if body, ok := cache[name]; ok {
			return body // a cache hit costs nothing: no slot
		}
		p, err := disk.TryAcquireFor(admit.Request{Kind: disk.Kind("read")})
		if err != nil {
			return "503 " + err.(*admit.RejectedError).Reason().String()
		}
		defer p.Done(admit.OutcomeOK)
		return "read " + name // the disk read happens here, holding the slot
	}
	fmt.Println(serve("hot.txt"))
	fmt.Println(serve("cold.txt"))
	s := disk.Stats()
	fmt.Println("offered", s.Offered, "admitted", s.Admitted, "inflight", s.Inflight)
	// Output:
	// cached
	// read cold.txt
	// offered 1 admitted 1 inflight 0
}

// Acquire waits in a bounded queue; a refusal says why and when to retry.
func ExampleGate_Acquire() {
	g, _ := admit.New(admit.Config{Name: "upstream", Capacity: 1, MaxWaiters: 8, MaxWait: 10 * time.Millisecond})
	held, _ := g.TryAcquire()
	defer held.Done(admit.OutcomeOK)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := g.Acquire(ctx) // nobody releases: MaxWait ends the wait first
	var rej *admit.RejectedError
	if errors.As(err, &rej) {
		fmt.Println(rej.Gate(), rej.Reason(), "retry after", rej.RetryAfterSeconds(), "s")
	}
	fmt.Println(errors.Is(err, admit.ErrRejected), errors.Is(err, admit.ErrClosed))
	// Output:
	// upstream wait_timeout retry after 1 s
	// true false
}

// A Permit is released exactly once; extra Done calls are counted, never
// released.
func ExamplePermit_Done() {
	g, _ := admit.New(admit.Config{Capacity: 1})
	p, _ := g.TryAcquire()
	p.Done(admit.OutcomeOK)
	p.Done(admit.OutcomeOK) // a bug in the caller: counted, frees nothing
	fmt.Println("in use", g.InUse(), "misuse", g.Stats().Misuse)
	// Output: in use 0 misuse 1
}

// Weighted work takes several slots at once.
func ExampleGate_TryAcquireFor() {
	g, _ := admit.New(admit.Config{Name: "memory", Capacity: 10})
	big, _ := g.TryAcquireFor(admit.Request{Weight: 8})
	defer big.Done(admit.OutcomeOK)
	_, err := g.TryAcquireFor(admit.Request{Weight: 3})
	fmt.Println(err != nil, g.InUse())
	// Output: true 8
}

// Observers see every decision and completion; promsluice builds metrics
// on this hook.
func ExampleObserver() {
	var seen []string
	obs := observerFunc(func(e admit.AdmissionEvent) {
		seen = append(seen, fmt.Sprintf("%s accepted=%v reason=%q", e.Gate, e.Accepted, e.Reason))
	})
	g, _ := admit.New(admit.Config{Name: "db", Capacity: 1, Observer: obs})
	p, _ := g.TryAcquire()
	g.TryAcquire()
	p.Done(admit.OutcomeOK)
	for _, s := range seen {
		fmt.Println(s)
	}
	// Output:
	// db accepted=true reason=""
	// db accepted=false reason="full"
}

type observerFunc func(admit.AdmissionEvent)

func (f observerFunc) ObserveAdmission(e admit.AdmissionEvent)   { f(e) }
func (f observerFunc) ObserveCompletion(e admit.CompletionEvent) {}

// A Stats snapshot counts offered, admitted, rejected (by reason) and
// completed (by outcome) apart, per gate and per kind.
func ExampleGate_Stats() {
	g, _ := admit.New(admit.Config{Name: "disk", Capacity: 1, Kinds: []string{"read", "stream"}})
	p, _ := g.TryAcquireFor(admit.Request{Kind: g.Kind("stream")})
	g.TryAcquireFor(admit.Request{Kind: g.Kind("read")}) // refused: full
	p.Done(admit.OutcomeCanceled)
	s := g.Stats()
	fmt.Println("offered", s.Offered, "admitted", s.Admitted, "full", s.Rejected[admit.ReasonFull], "canceled", s.Completed[admit.OutcomeCanceled])
	for _, k := range s.Kinds {
		fmt.Println(k.Kind, k.Offered, k.Admitted, k.Rejected.Total())
	}
	// Output:
	// offered 2 admitted 1 full 1 canceled 1
	// read 1 0 1
	// stream 1 1 0
}

// RejectedError tells overload from shutdown, and carries what an HTTP
// edge needs for its answer.
func ExampleRejectedError() {
	g, _ := admit.New(admit.Config{Name: "upstream"})
	g.Close()
	_, err := g.TryAcquire()
	var rej *admit.RejectedError
	errors.As(err, &rej)
	fmt.Println(rej.Reason(), rej.Reason().Overload(), errors.Is(err, admit.ErrClosed), rej.RetryAfterSeconds())
	// Output: closed false true 1
}

// A gate that serves critical work first and sheds sheddable work under
// pressure, while keeping a tenth of its slots for sheddable work so it
// never starves.
func ExampleClassShares() {
	g, err := admit.New(admit.Config{
		Name: "search", Capacity: 10, MaxWaiters: 50, MaxWait: 200 * time.Millisecond,
		Queueing: admit.Queueing{Discipline: admit.DisciplineCoDel, ClassShares: admit.ClassShares{admit.ClassSheddable: 0.1}},
	})
	if err != nil {
		panic(err)
	}
	class, _ := admit.ParseClass("sheddable") // e.g. from a request header
	p, err := g.AcquireFor(context.Background(), admit.Request{Class: class})
	if err != nil {
		fmt.Println("refused:", err)
		return
	}
	defer p.Done(admit.OutcomeOK)
	fmt.Println("admitted", class, "work; oldest waiter:", g.OldestWait())
	// Output: admitted sheddable work; oldest waiter: 0s
}
