package repository_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
)

func ExampleNewMemory() {
	// Three requests per key per hour, for at most 10,000 keys; a key that
	// is full again and unused for ten minutes is forgotten.
	repo := repository.NewMemory(func(key string) limiters.Limiter {
		return limiters.NewGCRA(limiters.PerHour(3), 3)
	}, repository.WithMaxKeys(10_000), repository.WithIdleTimeout(10*time.Minute))
	defer repo.Close()

	ctx := context.Background()
	for _, key := range []string{"alice", "alice", "alice", "alice", "bob"} {
		d, err := repo.TryAcquire(ctx, key, 1)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: allowed=%t remaining=%d\n", key, d.Allowed, d.Remaining)
	}
	fmt.Println("keys:", repo.Len())
	// Output:
	// alice: allowed=true remaining=2
	// alice: allowed=true remaining=1
	// alice: allowed=true remaining=0
	// alice: allowed=false remaining=0
	// bob: allowed=true remaining=2
	// keys: 2
}

func ExampleErrTooManyKeys() {
	// One permit in flight per key, for at most one key.
	repo := repository.NewMemory(func(string) limiters.Limiter {
		return limiters.NewConcurrency(1)
	}, repository.WithMaxKeys(1))
	defer repo.Close()

	ctx := context.Background()
	fmt.Println(repo.Acquire(ctx, "a", 1)) // a holds its permit: it cannot be evicted
	err := repo.Acquire(ctx, "b", 1)
	fmt.Println(err, errors.Is(err, repository.ErrTooManyKeys))
	fmt.Println(repo.Release(ctx, "a", 1)) // now a is idle, and gives way
	fmt.Println(repo.Acquire(ctx, "b", 1))
	// Output:
	// <nil>
	// repository: too many keys true
	// <nil>
	// <nil>
}
