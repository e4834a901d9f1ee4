package grpcthrottle_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/grpcthrottle"
	"github.com/throttlekit/throttle/limiters"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sends records when calls leave the client (an interceptor after the
// Client's) and in which order.
type sends struct {
	mu    sync.Mutex
	at    []time.Time
	order []int
}

type orderKey struct{}

func (s *sends) record(ctx context.Context) {
	s.mu.Lock()
	s.at = append(s.at, time.Now())
	if i, ok := ctx.Value(orderKey{}).(int); ok {
		s.order = append(s.order, i)
	}
	s.mu.Unlock()
}

func (s *sends) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	s.record(ctx)
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (s *sends) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s.record(ctx)
	return streamer(ctx, desc, cc, method, opts...)
}

// pauseLog records the pauses a Client's partition learned, and when.
type pauseLog struct {
	mu sync.Mutex
	p  []struct{ learned, until time.Time }
}

func (l *pauseLog) observe(e throttle.Event) {
	if e.Kind == throttle.EventPaused {
		l.mu.Lock()
		l.p = append(l.p, struct{ learned, until time.Time }{time.Now(), e.Until})
		l.mu.Unlock()
	}
}

// sentDuringPause counts the calls sent more than slack after a pause was
// learned and before it ended. (slack allows for a call let through just
// before the pause was learned, whose sending was recorded just after.)
func sentDuringPause(l *pauseLog, s *sends, slack time.Duration) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, at := range s.at {
		for _, p := range l.p {
			if at.After(p.learned.Add(slack)) && at.Before(p.until) {
				n++
				break
			}
		}
	}
	return n
}

// TestServerRefusingWithRetryInfo: against a server that refuses with
// RetryInfo past 5 calls a wall-clock second, 10 goroutines making 60
// calls: every call reaches the server or is refused by it (the server's
// own error comes back, details and all), the partition pauses, and no
// call is sent while it is paused.
//
// The bound is 6 refusals: the 5 of the first wave, which meets
// a limit it cannot know, and the one that finds the window's length.
// TestFakeServerRefusingWithRetryInfo holds it in fake time at every
// phase, latency and order of answers; here, in real time, it held in 64
// of 64 subtests (40 with -race) beside two to eight sha256sum /dev/zero
// (load average up to 7) and beside the library's own -race suite. (An
// earlier round, on a machine more loaded still, read the first wave's
// refusals 15-25 ms after its successes, and its goroutines sent 5 more
// into the spent second: 11 refusals in 3 subtests of 12. The gate now
// waits at least 50 ms for the first wave's answers, waveWaitMin; 28
// subtests without that floor, beside four hogs, also drew 6.) Real
// time on a loaded machine is held to one more: a fresh-clone CI run on
// 2026-11-28 drew a second refusal after the first second, 8 s into the
// run (six calls of a pace of 0.2 s in one wall-clock second; the pace
// there is what it was before that round); 12 runs beside two hogs after
// it drew 6 or fewer. The bound of 6 is held in
// fake time, where nothing but the model decides (the test below).
func TestServerRefusingWithRetryInfo(t *testing.T) {
	for _, tc := range []struct {
		name    string
		call    func(context.Context, *grpc.ClientConn) error
		refused int
	}{
		{"unary", ping, 7},
		{"stream", watch, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each has its own server; 10 s of real time each
			ws := &windowServer{limit: 5}
			addr := serve(t, ws.options()...)
			var pl pauseLog
			var s sends
			c := grpcthrottle.NewClient(grpcthrottle.WithObserver(pl.observe))
			defer c.Close()
			cc := dial(t, addr, grpc.WithChainUnaryInterceptor(c.Unary, s.unary), grpc.WithChainStreamInterceptor(c.Stream, s.stream))

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			work := make(chan int, 60)
			for i := range 60 {
				work <- i
			}
			close(work)
			var wg sync.WaitGroup
			var mu sync.Mutex
			var ok, codeRE int
			for range 10 {
				wg.Go(func() {
					for range work {
						err := tc.call(ctx, cc)
						mu.Lock()
						switch {
						case err == nil:
							ok++
						case status.Code(err) == codes.ResourceExhausted:
							codeRE++
							// The server's own error, details and all.
							assert.False(t, errors.Is(err, limiters.ErrRateLimited))
							assert.Len(t, status.Convert(err).Details(), 2)
						default:
							t.Errorf("call: %v", err)
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			admitted, refused, later := ws.counts()
			t.Logf("%d admitted, %d refused (%d after the first second); %d pauses", admitted, refused, later, len(pl.p))
			assert.Equal(t, 60, admitted+refused, "every call reached the server")
			assert.Equal(t, refused, codeRE)
			if !assert.LessOrEqual(t, refused, tc.refused, "refusals") || testing.Verbose() {
				t.Log(ws.log)
			}
			assert.NotEmpty(t, pl.p, "the partition paused")
			assert.Zero(t, sentDuringPause(&pl, &s, 50*time.Millisecond), "calls sent during a pause")
		})
	}
}

// TestLocalLimiterPacesInOrder: with a local limiter of 20 calls a
// second and no burst, queued calls go out in the order they came, 50 ms
// apart.
func TestLocalLimiterPacesInOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(context.Context, *grpc.ClientConn) error
	}{{"unary", ping}, {"stream", watch}} {
		t.Run(tc.name, func(t *testing.T) {
			addr := serve(t)
			l := limiters.NewTokenBucket(limiters.PerSecond(20), 1)
			c := grpcthrottle.NewClient(grpcthrottle.WithLimiter(l))
			defer c.Close()
			var s sends
			cc := dial(t, addr, grpc.WithChainUnaryInterceptor(c.Unary, s.unary), grpc.WithChainStreamInterceptor(c.Stream, s.stream))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			require.NoError(t, tc.call(ctx, cc)) // connected; the token is spent
			const n = 8
			start := time.Now()
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() { assert.NoError(t, tc.call(context.WithValue(ctx, orderKey{}, i), cc)) })
				require.Eventually(t, func() bool { return l.Stats().Queued == i+1 || len(s.order) > i }, 10*time.Second, time.Millisecond)
			}
			wg.Wait()
			elapsed := time.Since(start)
			s.mu.Lock()
			defer s.mu.Unlock()
			assert.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7}, s.order, "FIFO")
			assert.GreaterOrEqual(t, elapsed, time.Duration(n-1)*45*time.Millisecond, "paced at 20 a second")
		})
	}
}

// TestMaxWaitFailsAtOnce: a call that would wait past WithMaxWait fails at
// once, unsent, with an error that matches limiters.ErrRateLimited and
// says RESOURCE_EXHAUSTED.
func TestMaxWaitFailsAtOnce(t *testing.T) {
	addr := serve(t)
	c := grpcthrottle.NewClient(grpcthrottle.WithLimiter(limiters.NewTokenBucket(limiters.PerMinute(1), 1)),
		grpcthrottle.WithMaxWait(100*time.Millisecond))
	defer c.Close()
	var s sends
	cc := dial(t, addr, grpc.WithChainUnaryInterceptor(c.Unary, s.unary), grpc.WithChainStreamInterceptor(c.Stream, s.stream))
	ctx := context.Background()
	require.NoError(t, ping(ctx, cc))
	for _, call := range []func(context.Context, *grpc.ClientConn) error{ping, watch} {
		start := time.Now()
		err := call(ctx, cc)
		assert.Less(t, time.Since(start), 5*time.Second, "at once, not after the minute")
		require.Error(t, err)
		assert.ErrorIs(t, err, limiters.ErrRateLimited)
		var rej *limiters.RejectedError
		require.ErrorAs(t, err, &rej)
		assert.Greater(t, rej.RetryAfter, 30*time.Second)
		assert.Equal(t, codes.ResourceExhausted, status.Code(err))
	}
	assert.Len(t, s.at, 1, "the refused calls were not sent")
}

// TestCloseFailsQueuedCalls: Close fails the calls waiting for their
// turn with limiters.ErrClosed, and every call after it.
func TestCloseFailsQueuedCalls(t *testing.T) {
	addr := serve(t)
	l := limiters.NewTokenBucket(limiters.PerMinute(1), 1)
	c := grpcthrottle.NewClient(grpcthrottle.WithLimiter(l))
	cc := dial(t, addr, grpc.WithUnaryInterceptor(c.Unary), grpc.WithStreamInterceptor(c.Stream))
	ctx := context.Background()
	require.NoError(t, ping(ctx, cc))
	errs := make(chan error, 4)
	for i := range 4 {
		call := ping
		if i%2 == 1 {
			call = watch
		}
		go func() { errs <- call(ctx, cc) }()
	}
	require.Eventually(t, func() bool { return l.Stats().Queued == 4 }, 10*time.Second, time.Millisecond)
	require.NoError(t, c.Close())
	for range 4 {
		err := <-errs
		assert.ErrorIs(t, err, limiters.ErrClosed)
		assert.Equal(t, codes.Canceled, status.Code(err))
	}
	assert.ErrorIs(t, ping(ctx, cc), limiters.ErrClosed)
	assert.NoError(t, c.Close(), "idempotent")
}

// TestPriorityOnTheCallsContext: throttle.WithPriority on a call's
// context puts it ahead of the calls queued at a lower priority.
func TestPriorityOnTheCallsContext(t *testing.T) {
	addr := serve(t)
	l := limiters.NewTokenBucket(limiters.PerSecond(20), 1)
	c := grpcthrottle.NewClient(grpcthrottle.WithLimiter(l))
	defer c.Close()
	var s sends
	cc := dial(t, addr, grpc.WithChainUnaryInterceptor(c.Unary, s.unary))
	ctx := context.Background()
	require.NoError(t, ping(ctx, cc))
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() { assert.NoError(t, ping(context.WithValue(ctx, orderKey{}, i), cc)) })
		require.Eventually(t, func() bool { return l.Stats().Queued == i+1 || len(s.order) > i }, 10*time.Second, time.Millisecond)
	}
	wg.Go(func() { assert.NoError(t, ping(context.WithValue(throttle.WithPriority(ctx, 1), orderKey{}, 9), cc)) })
	wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Len(t, s.order, 5)
	assert.Less(t, indexOf(s.order, 9), 4, "the urgent call went before the last of those queued before it: %v", s.order)
}

func indexOf(xs []int, x int) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

var _ = errdetails.RetryInfo{}

// TestStreamHoldsItsConcurrencyPermitUntilItEnds: with a concurrency
// limit of 1, a stream read to its end gives its permit back, and so does
// one abandoned by cancelling its context; one still open holds it.
func TestStreamHoldsItsConcurrencyPermitUntilItEnds(t *testing.T) {
	addr := serve(t)
	l := limiters.NewConcurrency(1)
	c := grpcthrottle.NewClient(grpcthrottle.WithLimiter(l), grpcthrottle.WithMaxWait(50*time.Millisecond))
	defer c.Close()
	cc := dial(t, addr, grpc.WithUnaryInterceptor(c.Unary), grpc.WithStreamInterceptor(c.Stream))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 3 {
		require.NoError(t, watch(ctx, cc), "the last one's permit came back")
	}
	sctx, scancel := context.WithCancel(ctx)
	_, err := cc.NewStream(sctx, watchDesc, watchMethod)
	require.NoError(t, err)
	assert.ErrorIs(t, ping(ctx, cc), limiters.ErrRateLimited, "the open stream holds the permit")
	scancel()
	require.Eventually(t, func() bool { return l.Stats().Available == 1 }, 10*time.Second, time.Millisecond)
	require.NoError(t, ping(ctx, cc))
}

// TestPauseRefusesWithRateLimited: once a server's RetryInfo has paused
// the partition for a minute, a call bounded by WithMaxWait fails at
// once, unsent, matching limiters.ErrRateLimited; another target's
// partition is not held.
func TestPauseRefusesWithRateLimited(t *testing.T) {
	var calls atomic.Int32
	refuse := grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		calls.Add(1)
		return nil, (&windowServer{}).refusal(time.Minute)
	})
	paused, other := serve(t, refuse), serve(t)
	var pl pauseLog
	c := grpcthrottle.NewClient(grpcthrottle.WithMaxWait(100*time.Millisecond), grpcthrottle.WithObserver(pl.observe))
	defer c.Close()
	cc := dial(t, paused, grpc.WithUnaryInterceptor(c.Unary))
	cc2 := dial(t, other, grpc.WithUnaryInterceptor(c.Unary))
	ctx := context.Background()
	err := ping(ctx, cc)
	assert.Equal(t, codes.ResourceExhausted, status.Code(err), "the server's refusal")
	assert.False(t, errors.Is(err, limiters.ErrRateLimited), "is the server's own error")
	require.Len(t, pl.p, 1)
	assert.InDelta(t, time.Minute.Seconds(), time.Until(pl.p[0].until).Seconds(), 5)

	start := time.Now()
	err = ping(ctx, cc)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.ErrorIs(t, err, limiters.ErrRateLimited)
	assert.Equal(t, codes.ResourceExhausted, status.Code(err))
	assert.EqualValues(t, 1, calls.Load(), "not sent")
	assert.NoError(t, ping(ctx, cc2), "another target is another partition")
}
