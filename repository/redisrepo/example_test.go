package redisrepo_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle/internal/redistest"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository/redisrepo"
)

// Two replicas sharing one limit of 3 per minute through Redis: together
// they admit 3. (It needs a Redis at REDIS_ADDR, so it is compiled, not
// run, by go test.)
func Example() {
	client := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer client.Close()
	spec := limiters.Spec{Algorithm: limiters.AlgSlidingLog, Limit: 3, Window: 60e9}
	a, err := redisrepo.New(client, spec, redisrepo.WithFailMode(redisrepo.FailLocal), redisrepo.WithReplicas(2))
	if err != nil {
		panic(err)
	}
	defer a.Close()
	b, _ := redisrepo.New(client, spec, redisrepo.WithFailMode(redisrepo.FailLocal), redisrepo.WithReplicas(2))
	defer b.Close()
	ctx := context.Background()
	for i, r := range []*redisrepo.Repository{a, b, a, b} {
		d, err := r.TryAcquire(ctx, "user-42", 1)
		fmt.Println(i, d.Allowed, d.Remaining, err)
	}
}

// TestExample runs Example against a real Redis, which go test cannot do
// for an Example without output.
func TestExample(t *testing.T) {
	s := redistest.Start(t)
	t.Setenv("REDIS_ADDR", s.Addr)
	Example()
}
