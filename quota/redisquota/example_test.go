package redisquota_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/quota/redisquota"
)

// Ten instances share 100 requests per second per API key. While Redis is
// down each admits its tenth.
func Example() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", MaxRetries: -1})
	defer client.Close()
	q, err := redisquota.New(redisquota.Config{
		Name: "per-client", Rate: 100, Burst: 20, Client: client, Instances: 10,
	})
	if err != nil {
		panic(err)
	}
	_, err = q.Decide(context.Background(), "api-key-1", 1)
	var re *admit.RejectedError
	if errors.As(err, &re) {
		fmt.Println("refused:", re.Reason(), "retry after", re.RetryAfter())
	}
}

// Ten instances share 50 connections to one database.
func ExampleSlots() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", MaxRetries: -1})
	defer client.Close()
	db, err := redisquota.NewSlots(redisquota.SlotsConfig{Name: "orders-db", Capacity: 50, Client: client})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	slot, err := db.TryAcquire(context.Background())
	if err != nil {
		fmt.Println("busy:", err) // 503 at the edge
		return
	}
	defer slot.Done(admit.OutcomeOK)
	// ... use one database connection ...
}
