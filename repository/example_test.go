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

// A million clients' token buckets in a few dozen megabytes: each key is one
// timestamp, forgotten as soon as its bucket is full again.
func ExampleNewGCRA() {
	repo := repository.NewGCRA(limiters.PerMinute(60), 3, repository.WithMaxKeys(1_000_000))
	defer repo.Close()
	ctx := context.Background()
	for i := range 4 {
		d, _ := repo.TryAcquire(ctx, "203.0.113.7", 1)
		fmt.Printf("request %d: allowed=%v remaining=%d\n", i+1, d.Allowed, d.Remaining)
	}
	fmt.Println("keys held:", repo.Len())
	// Output:
	// request 1: allowed=true remaining=2
	// request 2: allowed=true remaining=1
	// request 3: allowed=true remaining=0
	// request 4: allowed=false remaining=0
	// keys held: 1
}

// With RefuseNew, a client that mints keys cannot push out the keys in use
// (and so reset their limits): its new keys are refused instead, and counted.
func ExampleWithOverflow() {
	repo := repository.NewMemory(func(string) limiters.Limiter {
		return limiters.NewTokenBucket(limiters.PerHour(5), 5)
	}, repository.WithMaxKeys(2), repository.WithOverflow(repository.RefuseNew))
	defer repo.Close()

	ctx := context.Background()
	for _, key := range []string{"alice", "bob", "minted-1", "minted-2"} {
		_, err := repo.TryAcquire(ctx, key, 1)
		fmt.Println(key, err)
	}
	fmt.Printf("%+v\n", repo.Stats())
	// Output:
	// alice <nil>
	// bob <nil>
	// minted-1 repository: too many keys
	// minted-2 repository: too many keys
	// {Keys:2 Evicted:0 Refused:2}
}

// An operator halves the burst during an incident: every key keeps the
// permits it has used.
func ExampleGCRA_SetRate() {
	repo := repository.NewGCRA(limiters.PerMinute(60), 10)
	defer repo.Close()
	ctx := context.Background()

	d, _ := repo.TryAcquire(ctx, "203.0.113.7", 4)
	fmt.Println("remaining:", d.Remaining, "of", d.Limit)
	if err := repo.SetRate(limiters.PerMinute(60), 5); err != nil {
		fmt.Println(err)
		return
	}
	d, _ = repo.Peek(ctx, "203.0.113.7")
	fmt.Println("remaining:", d.Remaining, "of", d.Limit)
	// Output:
	// remaining: 6 of 10
	// remaining: 1 of 5
}
