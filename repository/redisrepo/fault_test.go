package redisrepo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle/internal/testutil/redistest"
	"github.com/throttlekit/throttle/limiters"
)

// faultOpts make failures quick to detect and to recover from.
func faultOpts(mode FailMode, events *eventLog) []Option {
	return []Option{WithFailMode(mode), WithTimeout(200 * time.Millisecond),
		WithBreaker(3, 300*time.Millisecond), WithReplicas(4), WithObserver(events.add)}
}

type eventLog struct {
	mu sync.Mutex
	ev []Event
}

func (l *eventLog) add(e Event) { l.mu.Lock(); l.ev = append(l.ev, e); l.mu.Unlock() }

func (l *eventLog) count(k EventKind, state string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.ev {
		if e.Kind == k && (state == "" || e.State == state) {
			n++
		}
	}
	return n
}

// outlived is how long after its start a call with a 1 s context has
// outlived it: a loaded machine wakes a goroutine whose context ended a few
// hundred milliseconds late, while a call that ignores its context waits
// for a dial or read timeout (5 s and more).
const outlived = 2 * time.Second

// bounded calls f with a 1s context and fails t if it outlives it.
func bounded(t *testing.T, f func(ctx context.Context)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	begin := time.Now()
	f(ctx)
	if el := time.Since(begin); el > outlived {
		t.Errorf("a call took %v with a 1s context", el)
	}
}

// checkDown asserts what each fail mode decides while Redis is away.
func checkDown(t *testing.T, mode FailMode, r *Repository, key string) {
	t.Helper()
	bounded(t, func(ctx context.Context) {
		d, err := r.TryAcquire(ctx, key, 1)
		switch mode {
		case FailClosed:
			if !errors.Is(err, ErrUnavailable) || d.Allowed {
				t.Errorf("FailClosed while down: %+v, %v; want ErrUnavailable", d, err)
			}
		case FailOpen:
			if err != nil || !d.Allowed {
				t.Errorf("FailOpen while down: %+v, %v; want allowed", d, err)
			}
		case FailLocal:
			if err != nil || d.Limit != 25 {
				t.Errorf("FailLocal while down: %+v, %v; want a local decision of limit 100/4", d, err)
			}
		}
	})
	bounded(t, func(ctx context.Context) {
		err := r.Acquire(ctx, key, 1)
		if (mode == FailClosed) != errors.Is(err, ErrUnavailable) {
			t.Errorf("%v Acquire while down: %v", mode, err)
		}
	})
}

// waitUp waits until r decides through Redis again.
func waitUp(t *testing.T, r *Repository, key string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var d limiters.Decision
		var err error
		bounded(t, func(ctx context.Context) { d, err = r.TryAcquire(ctx, key, 0) })
		if err == nil && d.Limit == 100 && r.BreakerState() == "closed" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery: %+v, %v, breaker %s", d, err, r.BreakerState())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var faultSpec = limiters.Spec{Algorithm: limiters.AlgGCRA, Limit: 100, Rate: limiters.PerSecond(100)}

// load runs TryAcquire in a loop on r until stop, every call within a 1s
// context, counting calls that outlive it.
func load(r *Repository, stop <-chan struct{}, late *atomic.Int64) *sync.WaitGroup {
	var wg sync.WaitGroup
	until(&wg, 4, stop, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		begin := time.Now()
		r.TryAcquire(ctx, "load", 1)
		if time.Since(begin) > outlived {
			late.Add(1)
		}
		cancel()
		time.Sleep(time.Millisecond)
		return true
	})
	return &wg
}

// TestStopRestart stops Redis under load and starts it again on the same
// port: each fail mode behaves as documented, no call outlives its context,
// the breaker opens, and service comes back by itself.
func TestStopRestart(t *testing.T) {
	s := redistest.Start(t)
	for i, mode := range []FailMode{FailClosed, FailOpen, FailLocal} {
		kind := clientKinds[i%2]
		t.Run(mode.String()+"/"+kind.name, func(t *testing.T) {
			events := &eventLog{}
			r := newRepo(t, kind.make(t, s), faultSpec, faultOpts(mode, events)...)
			waitUp(t, r, "k")
			stop := make(chan struct{})
			var late atomic.Int64
			wg := load(r, stop, &late)
			time.Sleep(50 * time.Millisecond)
			s.Stop()
			for range 5 {
				checkDown(t, mode, r, "k")
			}
			if r.BreakerState() != "open" || events.count(EventBreaker, "open") == 0 {
				t.Errorf("breaker %s after repeated failures, want open", r.BreakerState())
			}
			kind := map[FailMode]EventKind{FailClosed: EventFailClosed, FailOpen: EventFailOpen, FailLocal: EventFailLocal}[mode]
			if events.count(kind, "") == 0 {
				t.Errorf("the observer heard no %v event", mode)
			}
			s.Restart(t)
			waitUp(t, r, "k")
			if events.count(EventBreaker, "half-open") == 0 || events.count(EventBreaker, "closed") == 0 {
				t.Errorf("the breaker never went half-open then closed (now %s)", r.BreakerState())
			}
			close(stop)
			wg.Wait()
			if n := late.Load(); n > 0 {
				t.Errorf("%d calls outlived their 1s context", n)
			}
		})
	}
}

// TestPause: a Redis that stops answering (CLIENT PAUSE, DEBUG SLEEP) costs
// each call at most the round-trip timeout, and service resumes after.
func TestPause(t *testing.T) {
	s := redistest.Start(t)
	admin := newClient(t, s)
	var sleeping sync.WaitGroup
	defer sleeping.Wait()
	for _, pause := range []struct {
		name string
		do   func(ctx context.Context) error
	}{
		{"CLIENT PAUSE", func(ctx context.Context) error { return admin.ClientPause(ctx, 800*time.Millisecond).Err() }},
		{"DEBUG SLEEP", func(ctx context.Context) error {
			sleeping.Go(func() { admin.Do(context.Background(), "DEBUG", "SLEEP", "0.8") }) // blocks the whole server
			time.Sleep(50 * time.Millisecond)
			return nil
		}},
	} {
		for _, kind := range clientKinds {
			t.Run(pause.name+"/"+kind.name, func(t *testing.T) {
				events := &eventLog{}
				r := newRepo(t, kind.make(t, s), faultSpec, faultOpts(FailOpen, events)...)
				waitUp(t, r, "k")
				if err := pause.do(context.Background()); err != nil {
					t.Fatal(err)
				}
				bounded(t, func(ctx context.Context) {
					begin := time.Now()
					d, err := r.TryAcquire(ctx, "k", 1)
					if err != nil || !d.Allowed || events.count(EventFailOpen, "") == 0 {
						t.Errorf("FailOpen while paused: %+v, %v", d, err)
					}
					if el := time.Since(begin); el > 600*time.Millisecond {
						t.Errorf("a call took %v with a 200ms round-trip timeout", el)
					}
				})
				// A context that is never cancelled: with ctx-client the call
				// makes its own round trip, which the client's deadline bounds.
				begin := time.Now()
				if d, err := r.TryAcquire(context.Background(), "k", 1); err != nil || !d.Allowed {
					t.Errorf("FailOpen while paused, background ctx: %+v, %v", d, err)
				}
				if el := time.Since(begin); el > 600*time.Millisecond {
					t.Errorf("a background call took %v with a 200ms round-trip timeout", el)
				}
				waitUp(t, r, "k")
			})
		}
	}
}

// TestClusterMasterDown kills one master of a Cluster: keys it served fail
// as FailClosed says, keys on the other masters keep working, and the
// restarted master serves again.
func TestClusterMasterDown(t *testing.T) {
	cl := redistest.StartCluster(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), MaxRedirects: 2,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { c.Close() })
	events := &eventLog{}
	r := newRepo(t, c, faultSpec, append(faultOpts(FailClosed, events), WithBreaker(1000, time.Second))...)
	ctx := ctxT(t)
	// Find a key on the first master and one elsewhere.
	victim := cl.Masters[0]
	var onVictim, elsewhere string
	for i := 0; onVictim == "" || elsewhere == ""; i++ {
		k := "key" + strconv.Itoa(i)
		addr, err := masterOf(ctx, c, r.keys(k)[0])
		if err != nil {
			t.Fatal(err)
		}
		if addr == victim.Addr {
			onVictim = k
		} else {
			elsewhere = k
		}
	}
	waitUp(t, r, onVictim)
	victim.Stop()
	bounded(t, func(ctx context.Context) {
		if _, err := r.TryAcquire(ctx, onVictim, 1); !errors.Is(err, ErrUnavailable) {
			t.Errorf("a key on the dead master: %v, want ErrUnavailable", err)
		}
	})
	bounded(t, func(ctx context.Context) {
		if d, err := r.TryAcquire(ctx, elsewhere, 1); err != nil || !d.Allowed {
			t.Errorf("a key on a live master: %+v, %v", d, err)
		}
	})
	victim.Restart(t)
	waitUp(t, r, onVictim)
}

func masterOf(ctx context.Context, c *redis.ClusterClient, key string) (string, error) {
	slot, err := c.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		return "", err
	}
	shards, err := c.ClusterShards(ctx).Result()
	if err != nil {
		return "", err
	}
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if r.Start <= slot && slot <= r.End {
				for _, n := range sh.Nodes {
					if n.Role == "master" {
						return net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10)), nil
					}
				}
			}
		}
	}
	return "", fmt.Errorf("no master for slot %d", slot)
}

// TestFailLocalReset: while Redis is away, Peek and Reset reach the local
// limiter: a Peek spends nothing, and a Reset gives the key a fresh quota
// (and reports that Redis could not be reset).
func TestFailLocalReset(t *testing.T) {
	s := redistest.Start(t)
	r := newRepo(t, newClient(t, s), limiters.Spec{Algorithm: limiters.AlgFixedWindow, Limit: 8, Window: time.Hour},
		faultOpts(FailLocal, &eventLog{})...)
	ctx := ctxT(t)
	s.Stop()
	for range 2 {
		if d, err := r.TryAcquire(ctx, "k", 1); err != nil || !d.Allowed {
			t.Fatalf("local grant of 8/4: %+v, %v", d, err)
		}
	}
	if d, err := r.Peek(ctx, "k"); err != nil || d.Allowed || d.Remaining != 0 {
		t.Fatalf("local peek after 2 of 8/4: %+v, %v", d, err)
	}
	if err := r.Reset(ctx, "k"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Reset with Redis away: %v, want ErrUnavailable", err)
	}
	if d, err := r.Peek(ctx, "k"); err != nil || d.Remaining != 2 {
		t.Fatalf("local peek after Reset: %+v, %v; want a fresh quota", d, err)
	}
}

// TestFailLocalLeases: while Redis is away, FailLocal hands out local
// concurrency permits (limit divided by the replicas), and their Release,
// even a double one, goes back to the local limiter without a panic.
func TestFailLocalLeases(t *testing.T) {
	s := redistest.Start(t)
	events := &eventLog{}
	spec := limiters.Spec{Algorithm: limiters.AlgConcurrency, Limit: 8}
	r := newRepo(t, newClient(t, s), spec, faultOpts(FailLocal, events)...)
	ctx := ctxT(t)
	s.Stop()
	for i := range 3 {
		d, err := r.TryAcquire(ctx, "k", 1)
		if err != nil || d.Allowed != (i < 2) {
			t.Fatalf("local permit %d of 8/4: %+v, %v", i, d, err)
		}
	}
	for range 4 {
		if err := r.Release(ctx, "k", 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Acquire(ctx, "k", 2); err != nil {
		t.Fatalf("Acquire after the local permits came back: %v", err)
	}
}
