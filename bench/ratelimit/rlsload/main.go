// Command rlsload drives an Envoy rate limit service
// (envoy.service.ratelimit.v3) with closed-loop ShouldRateLimit calls and
// prints one JSON line: decisions per second, latency percentiles and
// the codes counted. bench/scripts/ratelimit.sh runs it against sluice
// ratelimit and the reference server in interleaved rounds.
//
// Each of -workers goroutines sends one call at a time over one of -conns
// gRPC connections, for -duration, cycling through -keys descriptor
// values; latency is measured from just before the call to its answer
// (closed loop: there is no schedule to fall behind, so no coordinated
// omission to correct, and the figure is the service time under this
// concurrency).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

type result struct {
	Target    string  `json:"target"`
	Decisions int64   `json:"decisions"`
	PerSecond float64 `json:"per_second"`
	P50us     int64   `json:"p50_us"`
	P99us     int64   `json:"p99_us"`
	P999us    int64   `json:"p999_us"`
	OK        int64   `json:"ok"`
	Over      int64   `json:"over_limit"`
	Errors    int64   `json:"errors"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "the rate limit service's gRPC `address`")
	name := flag.String("name", "", "label of the target in the output (default: the address)")
	domain := flag.String("domain", "bench", "the request's domain")
	key := flag.String("key", "user", "the descriptor entry's key")
	keys := flag.Int("keys", 100, "distinct descriptor values, cycled through")
	workers := flag.Int("workers", 32, "concurrent callers")
	conns := flag.Int("conns", 4, "gRPC connections the callers share")
	duration := flag.Duration("duration", 5*time.Second, "how long to send")
	warmup := flag.Duration("warmup", time.Second, "calls sent first and not counted")
	flag.Parse()
	if *workers < 1 || *conns < 1 || *keys < 1 || *duration <= 0 {
		fmt.Fprintln(os.Stderr, "rlsload: -workers, -conns, -keys and -duration must be positive")
		os.Exit(2)
	}
	if *name == "" {
		*name = *addr
	}
	clients := make([]pb.RateLimitServiceClient, *conns)
	for i := range clients {
		cc, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			fmt.Fprintln(os.Stderr, "rlsload:", err)
			os.Exit(1)
		}
		defer cc.Close()
		clients[i] = pb.NewRateLimitServiceClient(cc)
	}
	reqs := make([]*pb.RateLimitRequest, *keys)
	for i := range reqs {
		reqs[i] = &pb.RateLimitRequest{Domain: *domain, Descriptors: []*rlv3.RateLimitDescriptor{{
			Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: *key, Value: "u" + strconv.Itoa(i)}}}}}
	}
	// A first call must succeed: a target that is not up is an error,
	// not a run of errors.
	if _, err := clients[0].ShouldRateLimit(context.Background(), reqs[0]); err != nil {
		fmt.Fprintln(os.Stderr, "rlsload: first call:", err)
		os.Exit(1)
	}
	run := func(d time.Duration) result {
		var mu sync.Mutex
		total := hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
		var r result
		stop := time.Now().Add(d)
		var wg sync.WaitGroup
		start := time.Now()
		for w := range *workers {
			wg.Go(func() {
				h := hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
				var ok, over, errs int64
				c := clients[w%len(clients)]
				for i := w; time.Now().Before(stop); i++ {
					t0 := time.Now()
					resp, err := c.ShouldRateLimit(context.Background(), reqs[i%len(reqs)])
					us := time.Since(t0).Microseconds()
					switch {
					case err != nil:
						errs++
						continue
					case resp.OverallCode == pb.RateLimitResponse_OVER_LIMIT:
						over++
					default:
						ok++
					}
					_ = h.RecordValue(max(us, 1))
				}
				mu.Lock()
				total.Merge(h)
				r.OK += ok
				r.Over += over
				r.Errors += errs
				mu.Unlock()
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		r.Target = *name
		r.Decisions = r.OK + r.Over
		r.PerSecond = float64(r.Decisions) / elapsed.Seconds()
		r.P50us, r.P99us, r.P999us = total.ValueAtQuantile(50), total.ValueAtQuantile(99), total.ValueAtQuantile(99.9)
		return r
	}
	if *warmup > 0 {
		run(*warmup)
	}
	r := run(*duration)
	_ = json.NewEncoder(os.Stdout).Encode(r)
	if r.Errors > 0 {
		fmt.Fprintf(os.Stderr, "rlsload: %d calls failed\n", r.Errors)
	}
}
