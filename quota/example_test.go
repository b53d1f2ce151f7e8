package quota_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/quota"
)

// A client with 2 tokens per second and a burst of 4 spends its burst on
// a 3-token scan and a point read, then is told exactly when it can come
// back.
func Example() {
	q, err := quota.New(quota.Config{Name: "per-client", Rate: 2, Burst: 4})
	if err != nil {
		panic(err)
	}
	now := time.Unix(0, 0)
	fmt.Println(q.AllowNAt("alice", 3, now)) // a scan
	fmt.Println(q.AllowNAt("alice", 1, now)) // a point read
	err = q.AllowNAt("alice", 2, now)
	var re *admit.RejectedError
	if errors.As(err, &re) {
		fmt.Println(re.Reason(), re.RetryAfter(), re.RetryAfterSeconds())
	}
	fmt.Println(q.AllowNAt("bob", 1, now)) // bob has his own bucket
	// Output:
	// <nil>
	// <nil>
	// rate 1s 1
	// <nil>
}
