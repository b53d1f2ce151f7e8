package pool_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/pool"
)

func Example() {
	p, err := pool.New(pool.Config{Name: "resize", Core: 2, Max: 4, Queue: 16})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	var done atomic.Int64
	for range 10 {
		err := p.Go(ctx, pool.Func(func(ctx context.Context) error {
			done.Add(1)
			return nil
		}))
		var rej *admit.RejectedError
		if errors.As(err, &rej) {
			fmt.Println("refused:", rej.Reason()) // not with this load
		}
	}
	if err := p.Shutdown(ctx); err != nil { // finishes everything accepted
		panic(err)
	}
	fmt.Println("done:", done.Load())
	err = p.Go(ctx, pool.Func(func(context.Context) error { return nil }))
	fmt.Println("after shutdown:", errors.Is(err, admit.ErrClosed))
	// Output:
	// done: 10
	// after shutdown: true
}

func ExamplePool_Submit() {
	p, _ := pool.New(pool.Config{Core: 1})
	ctx := context.Background()
	f, err := p.Submit(ctx, pool.Func(func(ctx context.Context) error {
		return errors.New("disk full")
	}))
	if err != nil {
		panic(err)
	}
	fmt.Println(f.Wait(ctx))
	_ = p.Shutdown(ctx)
	// Output: disk full
}

// A full pool with WhenFull Discard drops the new task, and its Future
// says so at once.
func ExampleWhenFull_discard() {
	p, _ := pool.New(pool.Config{Core: 1, WhenFull: pool.Discard})
	ctx := context.Background()
	release := make(chan struct{})
	started := make(chan struct{})
	_ = p.Go(ctx, pool.Func(func(context.Context) error {
		close(started)
		<-release
		return nil
	}))
	<-started
	f, err := p.Submit(ctx, pool.Func(func(context.Context) error { return nil }))
	fmt.Println(err, errors.Is(f.Err(), pool.ErrDropped))
	close(release)
	_ = p.Shutdown(ctx)
	s := p.Stats()
	fmt.Println("rejected queue_full:", s.Rejected[admit.ReasonQueueFull], "discarded:", s.Dropped[pool.DropDiscarded])
	// Output:
	// <nil> true
	// rejected queue_full: 1 discarded: 1
}
