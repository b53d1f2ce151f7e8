package ratelimit_test

import (
	"context"
	"fmt"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/ratelimit"
)

// A configuration in the reference server's format, decided in this
// process: two requests per hour per client address.
func Example() {
	table, err := ratelimit.Parse("edge.yaml", []byte(`
domain: edge
descriptors:
  - key: remote_address
    rate_limit:
      unit: hour
      requests_per_unit: 2
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	svc, err := ratelimit.New(ratelimit.Config{Algorithm: ratelimit.FixedWindow}, table)
	if err != nil {
		fmt.Println(err)
		return
	}
	req := &pb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{{
		Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "192.0.2.7"}},
	}}}
	for range 3 {
		resp, _ := svc.ShouldRateLimit(context.Background(), req)
		fmt.Println(resp.OverallCode, resp.Statuses[0].LimitRemaining)
	}
	// Output:
	// OK 1
	// OK 0
	// OVER_LIMIT 0
}
