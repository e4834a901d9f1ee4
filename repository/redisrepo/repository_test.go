package redisrepo

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/testutil/redistest"
	"github.com/throttlekit/throttle/limiters"
)

func TestPeekAndExceeds(t *testing.T) {
	s := redistest.Start(t)
	c := newClient(t, s)
	for alg, spec := range specs(3, time.Hour) {
		t.Run(alg, func(t *testing.T) {
			r := newRepo(t, c, spec, WithPrefix(alg+":"))
			ctx := ctxT(t)
			d, err := r.Peek(ctx, "k")
			if err != nil || !d.Allowed || d.Remaining != 3 || d.Limit != 3 {
				t.Fatalf("peek of a new key: %+v, %v", d, err)
			}
			if n := c.DBSize(ctx).Val(); n != 0 {
				t.Fatalf("a peek created %d keys", n)
			}
			if _, err := r.TryAcquire(ctx, "k", 1); err != nil {
				t.Fatal(err)
			}
			before, _ := r.Peek(ctx, "k")
			after, _ := r.Peek(ctx, "k")
			if before.Allowed != after.Allowed || before.Remaining != after.Remaining {
				t.Fatalf("peeks disagree: %+v then %+v", before, after)
			}
			// As the local limiters: refused, the state reported, nothing taken.
			if d, err := r.TryAcquire(ctx, "k", 4); err != nil || d.Allowed || d.Limit != 3 || d.Remaining != before.Remaining || d.RetryAfter != 0 {
				t.Fatalf("TryAcquire(4) of 3: %+v, %v; want refused with Remaining %d", d, err, before.Remaining)
			}
			if err := r.Acquire(ctx, "k", 4); !errors.Is(err, limiters.ErrExceedsLimit) {
				t.Fatalf("Acquire(4) of 3: %v, want ErrExceedsLimit", err)
			}
			if err := r.Reset(ctx, "k"); err != nil {
				t.Fatal(err)
			}
			if d, _ := r.Peek(ctx, "k"); d.Remaining != 3 {
				t.Fatalf("after Reset: %+v, want a full limiter", d)
			}
			if n := c.DBSize(ctx).Val(); n != 0 {
				t.Fatalf("%d keys left after Reset", n)
			}
		})
	}
}

// TestTTL: every key the scripts write carries a TTL no longer than its
// state matters.
func TestTTL(t *testing.T) {
	s := redistest.Start(t)
	c := newClient(t, s)
	win := 10 * time.Second
	for alg, spec := range specs(5, win) {
		t.Run(alg, func(t *testing.T) {
			r := newRepo(t, c, spec, WithPrefix("ttl-"+alg+":"), WithPermitLease(2*time.Second))
			ctx := ctxT(t)
			for range 3 {
				if _, err := r.TryAcquire(ctx, "k", 1); err != nil {
					t.Fatal(err)
				}
			}
			keys := c.Keys(ctx, "ttl-"+alg+":*").Val()
			if len(keys) == 0 {
				t.Fatal("no key written")
			}
			bound := map[string]time.Duration{
				limiters.AlgTokenBucket: 3 * win / 5, limiters.AlgGCRA: 3 * win / 5, limiters.AlgLeakyBucket: win / 5,
				limiters.AlgFixedWindow: win, limiters.AlgSlidingWindow: 2 * win, limiters.AlgSlidingLog: win,
				limiters.AlgConcurrency: 2 * time.Second,
			}[alg]
			for _, k := range keys {
				ttl := c.PTTL(ctx, k).Val()
				if ttl <= 0 || ttl > bound {
					t.Errorf("%s: TTL %v, want in (0, %v]", k, ttl, bound)
				}
			}
		})
	}
}

func TestKeys(t *testing.T) {
	s := redistest.Start(t)
	c := newClient(t, s)
	r := newRepo(t, c, specs(1, time.Hour)[limiters.AlgFixedWindow])
	ctx := ctxT(t)
	long := strings.Repeat("x", 1<<20)
	keys := []string{"", "a", "#a", long, long + "y", "\x00\xff\n", "a b", "{a}", "a}", "ü"}
	for _, k := range keys {
		d, err := r.TryAcquire(ctx, k, 1)
		if err != nil || !d.Allowed {
			t.Fatalf("key %.20q: %+v, %v: every key is distinct and starts full", k, d, err)
		}
	}
	for _, name := range c.Keys(ctx, "*").Val() {
		if len(name) > 100 {
			t.Errorf("key name of %d bytes: long keys must be hashed", len(name))
		}
		if !strings.HasPrefix(name, "throttle:{") {
			t.Errorf("key name %q lacks the prefix and hash tag", name)
		}
	}
	if n := len(c.Keys(ctx, "*").Val()); n != len(keys) {
		t.Fatalf("%d Redis keys for %d distinct keys", n, len(keys))
	}
}

func FuzzEncodeKey(f *testing.F) {
	f.Add("a", "#a")
	f.Add("", "\x00")
	f.Add(strings.Repeat("a", 64), strings.Repeat("a", 65))
	f.Fuzz(func(t *testing.T, a, b string) {
		ea, eb := encodeKey(a), encodeKey(b)
		if (a == b) != (ea == eb) {
			t.Fatalf("%q → %q and %q → %q", a, ea, b, eb)
		}
		if len(ea) > 65 || strings.ContainsAny(ea, "{}") {
			t.Fatalf("%q → %q: too long or breaks the hash tag", a, ea)
		}
	})
}

func TestInvalidSpec(t *testing.T) {
	s := redistest.Start(t)
	c := newClient(t, s)
	for _, tc := range []struct {
		spec  limiters.Spec
		field string
	}{
		{limiters.Spec{Algorithm: "nope", Limit: 1}, "algorithm"},
		{limiters.Spec{Algorithm: limiters.AlgGCRA, Limit: 0, Rate: limiters.PerSecond(1)}, "limit"},
		{limiters.Spec{Algorithm: limiters.AlgGCRA, Limit: 1}, "rate"},
		{limiters.Spec{Algorithm: limiters.AlgFixedWindow, Limit: 1}, "window"},
		{limiters.Spec{Algorithm: limiters.AlgFixedWindow, Limit: 1, Window: 1500 * time.Nanosecond}, "window"},
		// a burst beyond Lua's doubles (a period need not be whole µs)
		{limiters.Spec{Algorithm: limiters.AlgGCRA, Limit: 1 << 60, Rate: limiters.Rate{N: 1 << 40, Per: time.Second}}, "limit"},
		{limiters.Spec{Algorithm: limiters.AlgSlidingLog, Limit: maxLogLimit + 1, Window: time.Second}, "limit"},
	} {
		_, err := New(c, tc.spec)
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("New(%+v): %v, want an error naming %q", tc.spec, err, tc.field)
		}
	}
	if _, err := NewChain(c, nil); err == nil {
		t.Error("NewChain with no spec: no error")
	}
}

// TestForeignValue: a value we did not write at one of our keys is a clear
// error, never a panic nor an admit.
func TestForeignValue(t *testing.T) {
	s := redistest.Start(t)
	c := newClient(t, s)
	for alg, spec := range specs(5, time.Hour) {
		t.Run(alg, func(t *testing.T) {
			r := newRepo(t, c, spec, WithPrefix("f-"+alg+":"), WithFailMode(FailOpen))
			ctx := ctxT(t)
			for _, set := range []func(k string){
				func(k string) { c.Set(ctx, k, "garbage", 0) },
				func(k string) { c.HSet(ctx, k, "a", "b") },
			} {
				for _, k := range r.keys("victim") {
					c.Del(ctx, k)
					set(k)
				}
				d, err := r.TryAcquire(ctx, "victim", 1)
				if !errors.Is(err, ErrForeignValue) || d.Allowed {
					t.Fatalf("TryAcquire on a foreign value: %+v, %v; want ErrForeignValue", d, err)
				}
			}
			if r.BreakerState() != "closed" {
				t.Fatalf("a foreign value opened the breaker: %s", r.BreakerState())
			}
		})
	}
}

func TestReleaseLeases(t *testing.T) {
	s := redistest.Start(t)
	spec := limiters.Spec{Algorithm: limiters.AlgConcurrency, Limit: 2}
	// A lease long enough that a loaded machine (2 cores beside two
	// CPU-bound processes) renews it in time: 300 ms was not.
	const lease = 1500 * time.Millisecond
	a := newRepo(t, newClient(t, s), spec, WithPermitLease(lease))
	b := newRepo(t, newClient(t, s), spec, WithPermitLease(lease))
	ctx := ctxT(t)
	must := func(r *Repository, want bool) {
		t.Helper()
		d, err := r.TryAcquire(ctx, "k", 1)
		if err != nil || d.Allowed != want {
			t.Fatalf("TryAcquire: %+v, %v; want allowed=%v", d, err, want)
		}
	}
	must(a, true)
	must(b, true)
	must(a, false)
	// b's Release returns b's permit; a double Release is harmless.
	for range 3 {
		if err := b.Release(ctx, "k", 1); err != nil {
			t.Fatal(err)
		}
	}
	if d, _ := a.Peek(ctx, "k"); d.Remaining != 1 {
		t.Fatalf("after b's Release: %+v, want 1 remaining (a's permit still held)", d)
	}
	// Held permits are renewed past their lease.
	time.Sleep(lease + lease/3)
	if d, _ := a.Peek(ctx, "k"); d.Remaining != 1 {
		t.Fatalf("after more than a lease: %+v, want a's permit renewed", d)
	}
	// A crashed replica stops renewing: its permits come back after the lease.
	a.Close()
	deadline := time.Now().Add(lease + 10*time.Second)
	for {
		if d, _ := b.Peek(ctx, "k"); d.Remaining == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the closed replica's permit never expired")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestAcquireConcurrencyWakes(t *testing.T) {
	s := redistest.Start(t)
	r := newRepo(t, newClient(t, s), limiters.Spec{Algorithm: limiters.AlgConcurrency, Limit: 1}, WithPermitLease(time.Minute))
	ctx := ctxT(t)
	if err := r.Acquire(ctx, "k", 1); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- r.Acquire(ctx, "k", 1) }()
	time.Sleep(50 * time.Millisecond)
	if err := r.Release(ctx, "k", 1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second): // the poll interval would be 7.5s
		t.Fatal("a local Release did not wake the waiter")
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := r.Acquire(short, "k", 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire with every permit held: %v, want the deadline", err)
	}
}

// TestReserveFIFO: waiters on two replicas get the slots of their
// reservations, in reservation order, spaced at the rate: the i-th to reserve
// is granted no earlier than i intervals after the first.
func TestReserveFIFO(t *testing.T) {
	s := redistest.Start(t)
	const iv = 100 * time.Millisecond
	spec := limiters.Spec{Algorithm: limiters.AlgGCRA, Limit: 1, Rate: limiters.Rate{N: 1, Per: iv}}
	reps := []*Repository{newRepo(t, newClient(t, s), spec), newRepo(t, newClient(t, s), spec)}
	ctx := ctxT(t)
	granted := make([]time.Time, 6)
	var wg sync.WaitGroup
	var start time.Time
	for i := range granted {
		prev, _ := reps[0].Peek(ctx, "k")
		prevDue := time.Now().Add(prev.RetryAfter)
		if i == 0 {
			start = time.Now()
		}
		wg.Go(func() {
			if err := reps[i%2].Acquire(ctx, "k", 1); err != nil {
				t.Error(err)
			}
			granted[i] = time.Now()
		})
		for { // wait until i's reservation is in: the key's due time moves one interval on
			d, err := reps[0].Peek(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			if time.Now().Add(d.RetryAfter).After(prevDue.Add(iv / 2)) {
				break
			}
		}
	}
	wg.Wait()
	for i, at := range granted {
		if el := at.Sub(start); el < time.Duration(i)*iv-5*time.Millisecond {
			t.Errorf("reservation %d granted after %v, before its slot at %v", i, el, time.Duration(i)*iv)
		}
	}
}

func TestReserveDeadlineAndCancel(t *testing.T) {
	s := redistest.Start(t)
	spec := limiters.Spec{Algorithm: limiters.AlgGCRA, Limit: 1, Rate: limiters.Rate{N: 1, Per: time.Second}}
	r := newRepo(t, newClient(t, s), spec)
	ctx := ctxT(t)
	if err := r.Acquire(ctx, "k", 1); err != nil {
		t.Fatal(err)
	}
	// The slot is ~1s away: a 100ms deadline fails at once.
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	begin := time.Now()
	err := r.Acquire(short, "k", 1)
	var rej *limiters.RejectedError
	if !errors.As(err, &rej) || !errors.Is(err, context.DeadlineExceeded) || rej.RetryAfter < 800*time.Millisecond {
		t.Fatalf("Acquire past the deadline: %v, want a *RejectedError for about 1s caused by the deadline", err)
	}
	if time.Since(begin) > 80*time.Millisecond {
		t.Fatalf("the refusal took %v, want it at once", time.Since(begin))
	}
	// A cancelled reservation that is still the latest is given back.
	cctx, ccancel := context.WithCancel(ctx)
	go func() { time.Sleep(50 * time.Millisecond); ccancel() }()
	if err := r.Acquire(cctx, "k", 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Acquire: %v", err)
	}
	if d, _ := r.Peek(ctx, "k"); d.RetryAfter > time.Second {
		t.Fatalf("after the latest reservation was cancelled: %+v, want it given back (wait ≤ 1s)", d)
	}
	// One that is not the latest is left in place: the later one keeps its time.
	c1, cancel1 := context.WithCancel(ctx)
	first := make(chan error)
	go func() { first <- r.Acquire(c1, "k", 1) }()
	time.Sleep(30 * time.Millisecond)
	second := make(chan error)
	go func() { second <- r.Acquire(ctx, "k", 1) }()
	time.Sleep(30 * time.Millisecond)
	cancel1()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("first: %v", err)
	}
	if d, _ := r.Peek(ctx, "k"); d.RetryAfter < 1500*time.Millisecond {
		t.Fatalf("after an earlier reservation was cancelled: %+v, want the later reservation's slot kept (wait > 1.5s)", d)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
}
