package flow_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/flow"
)

func Example() {
	ctx := context.Background()
	s := flow.FromSeq(ctx, slices.Values([]string{"a", "b", "c", "d", "e", "f"}))
	_ = s.Request(2)
	a, _ := s.Recv(ctx)
	b, _ := s.Recv(ctx)
	fmt.Println(a, b, "emitted:", s.Stats().Emitted)
	s.Cancel()
	<-s.Done()
	_, err := s.Recv(ctx)
	fmt.Println(errors.Is(err, flow.ErrCanceled))
	// Output:
	// a b emitted: 2
	// true
}

func ExampleStream_All() {
	ctx := context.Background()
	s := flow.FromSlice(ctx, []int{1, 2, 3, 4, 5})
	for v, err := range s.All(ctx, 2) { // two values requested ahead of the loop
		if err != nil {
			panic(err)
		}
		fmt.Print(v, " ")
	}
	fmt.Println()
	// Output: 1 2 3 4 5
}

func ExampleBuffer() {
	ctx := context.Background()
	up := flow.FromSlice(ctx, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	groups := flow.Buffer(up, 4)
	_ = groups.Request(2)
	g1, _ := groups.Recv(ctx)
	g2, _ := groups.Recv(ctx)
	fmt.Println(g1, g2, "upstream requested:", up.Stats().Requested)
	groups.Cancel()
	<-groups.Done()
	// Output: [1 2 3 4] [5 6 7 8] upstream requested: 8
}

func ExampleOverflow() {
	ctx := context.Background()
	readings := flow.FromSlice(ctx, []int{20, 21, 22, 23, 24})
	latest := flow.Overflow(readings, 2, flow.DropOldest)
	<-readings.Done() // the source ran ahead; only the newest two are kept
	for v, err := range latest.All(ctx, 8) {
		if err != nil {
			panic(err)
		}
		fmt.Print(v, " ")
	}
	fmt.Println("dropped:", latest.Stats().Dropped)
	// Output: 23 24 dropped: 3
}

func ExampleMap() {
	ctx := context.Background()
	words := flow.FromSlice(ctx, []string{"demand", "flows", "up"})
	upper := flow.Map(words, 2, 4, func(ctx context.Context, w string) (string, error) {
		return strings.ToUpper(w), nil
	})
	var got []string
	for w, err := range upper.All(ctx, 4) {
		if err != nil {
			panic(err)
		}
		got = append(got, w)
	}
	slices.Sort(got) // results arrive in completion order
	fmt.Println(got)
	// Output: [DEMAND FLOWS UP]
}

func ExampleConsume() {
	ctx := context.Background()
	deliveries := flow.FromSlice(ctx, []string{"m1", "m2", "m3"})
	var acked []string
	err := flow.Consume(ctx, deliveries, flow.ConsumeConfig{MaxUnacked: 1},
		func(ctx context.Context, m string) error {
			return nil // the work: write to the database, call the upstream
		},
		func(m string, err error) {
			if err == nil {
				acked = append(acked, m) // ACK only now that the work is done
			}
		})
	fmt.Println(acked, err)
	// Output: [m1 m2 m3] <nil>
}
