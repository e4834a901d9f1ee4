package grpcthrottle_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/grpcthrottle"
)

// fakeWindow is windowServer in fake time, without a connection: an
// invoker (and a streamer) that takes latency to reach the server and as
// long to come back, where the server refuses past limit calls a
// wall-clock second with RESOURCE_EXHAUSTED carrying RetryInfo (to the
// next second) and QuotaFailure, as windowServer does. It records every
// call: when it was sent, when it reached the server, its outcome, and
// the pauses the refusals asked for (heard when their answer came back),
// so that a call sent after a refusal was heard and arriving before the
// wait it asked for had ended is counted as sent during a pause.
type fakeWindow struct {
	limit   int
	latency time.Duration
	handler time.Duration // how long the handler of an admitted call takes

	mu       sync.Mutex
	seq      int          // calls sent so far
	ws       windowServer // the server's count, on the bubble's clock
	start    time.Time
	calls    []fakeCall
	pauses   []fakePause // in the order heard
	inPause  int
	admitted int
	refused  int
}

type fakeCall struct {
	sent, arrived time.Time
	ok            bool
	during        bool
}

type fakePause struct{ heard, until time.Time }

// arrive is the server's side of a call sent at sent, arriving now.
func (f *fakeWindow) arrive(sent time.Time) (ok bool, wait time.Duration) {
	now := time.Now()
	ok, wait = f.ws.take()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.start.IsZero() {
		f.start = sent
	}
	// The pauses heard before the call was sent are a prefix; the last
	// of them ends latest.
	i := sort.Search(len(f.pauses), func(i int) bool { return !f.pauses[i].heard.Before(sent) })
	during := i > 0 && now.Before(f.pauses[i-1].until)
	if during {
		f.inPause++
	}
	if ok {
		f.admitted++
	} else {
		f.refused++
	}
	f.calls = append(f.calls, fakeCall{sent: sent, arrived: now, ok: ok, during: during})
	return ok, wait
}

// heard records that a refusal asking for wait, of a call that arrived
// at arrived, came back now.
func (f *fakeWindow) heard(arrived time.Time, wait time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := fakePause{heard: time.Now(), until: arrived.Add(wait)}
	if n := len(f.pauses); n > 0 && f.pauses[n-1].until.After(p.until) {
		p.until = f.pauses[n-1].until
	}
	f.pauses = append(f.pauses, p)
}

// lat is the next call's latency, each way: f.latency and a jitter of
// under 100 µs that differs from call to call, so that no two answers come
// back at the same instant of fake time and a run does not depend on the
// order in which the goroutines of one instant are run.
func (f *fakeWindow) lat() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	return f.latency + time.Duration(f.seq*37%97)*time.Microsecond
}

func (f *fakeWindow) invoke(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
	sent, lat := time.Now(), f.lat()
	time.Sleep(lat)
	arrived := time.Now()
	ok, wait := f.arrive(sent)
	time.Sleep(lat)
	if ok {
		time.Sleep(f.handler)
		return nil
	}
	f.heard(arrived, wait)
	return f.ws.refusal(wait)
}

// stream opens a fake server-streaming call: as with gRPC, it returns at
// once, and the server's answer is read by RecvMsg.
func (f *fakeWindow) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s := &fakeStream{ctx: ctx, f: f, sent: time.Now(), lat: f.lat(), decided: make(chan struct{})}
	go func() {
		time.Sleep(s.lat)
		s.arrived = time.Now()
		s.ok, s.wait = f.arrive(s.sent)
		close(s.decided)
	}()
	return s, nil
}

// fakeStream is a server-streaming call to a fakeWindow: the server
// decides when the call arrives; the first RecvMsg returns its refusal,
// or, admitted, the stream sends three messages.
type fakeStream struct {
	ctx     context.Context
	f       *fakeWindow
	sent    time.Time
	lat     time.Duration
	decided chan struct{}
	arrived time.Time
	ok      bool
	wait    time.Duration
	msgs    int
}

func (s *fakeStream) Header() (metadata.MD, error) { <-s.decided; return nil, nil }
func (s *fakeStream) Trailer() metadata.MD         { return nil }
func (s *fakeStream) CloseSend() error             { return nil }
func (s *fakeStream) Context() context.Context     { return s.ctx }
func (s *fakeStream) SendMsg(any) error            { return nil }

func (s *fakeStream) RecvMsg(any) error {
	if s.msgs == 0 {
		<-s.decided
		time.Sleep(time.Until(s.arrived.Add(s.lat)))
		if s.ok {
			time.Sleep(s.f.handler)
		} else {
			s.msgs = -1
			s.f.heard(s.arrived, s.wait)
			return s.f.ws.refusal(s.wait)
		}
	}
	if s.msgs < 0 {
		return io.EOF
	}
	if s.msgs++; s.msgs > 3 {
		return io.EOF
	}
	return nil
}

// fakeRun is one run against a fakeWindow: workers goroutines make total
// calls through a Client, starting phase into a second. handler is how
// long an admitted call's handler takes: 200 µs, longer than the jitter
// of the latency, and the refusals of a wave (by an interceptor, before
// any handler runs) come back before its successes; 0, and they come
// back mixed.
type fakeRun struct {
	limit, workers, total int
	phase, latency        time.Duration
	handler               time.Duration
	stream                bool
}

type fakeResult struct {
	admitted, refused, during int
	elapsed                   time.Duration
	log                       string
}

func (r fakeRun) String() string {
	kind := "unary"
	if r.stream {
		kind = "stream"
	}
	order := "refusals-first"
	if r.handler == 0 {
		order = "any-order"
	}
	return fmt.Sprintf("%s/%s/phase=%v/latency=%v", kind, order, r.phase, r.latency)
}

// run runs r in a synctest bubble; trace adds a log of the calls and the
// Client's events.
func (r fakeRun) run(t *testing.T, trace bool) (res fakeResult) {
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(r.phase) // the bubble starts on a whole second
		f := &fakeWindow{limit: r.limit, latency: r.latency, handler: r.handler, ws: windowServer{limit: r.limit}}
		var events []string
		var emu sync.Mutex
		start := time.Now()
		obs := func(e throttle.Event) {
			if !trace || e.Kind == throttle.EventAcquired {
				return
			}
			emu.Lock()
			defer emu.Unlock()
			events = append(events, fmt.Sprintf("%8.3f %v until=%v", time.Since(start).Seconds(), e.Kind, e.Until.Sub(start).Seconds()))
		}
		c := grpcthrottle.NewClient(grpcthrottle.WithObserver(obs))
		defer c.Close()
		desc := &grpc.StreamDesc{StreamName: "Watch", ServerStreams: true}
		call := func(ctx context.Context) error {
			if !r.stream {
				return c.Unary(ctx, pingMethod, nil, nil, nil, f.invoke)
			}
			s, err := c.Stream(ctx, desc, nil, watchMethod, f.stream)
			if err != nil {
				return err
			}
			for {
				if err := s.RecvMsg(nil); err == io.EOF {
					return nil
				} else if err != nil {
					return err
				}
			}
		}
		work := make(chan int, r.total)
		for i := range r.total {
			work <- i
		}
		close(work)
		var wg sync.WaitGroup
		for range r.workers {
			wg.Go(func() {
				for range work {
					_ = call(context.Background())
				}
			})
		}
		wg.Wait()
		res.elapsed = time.Since(start)
		f.mu.Lock()
		defer f.mu.Unlock()
		res.admitted, res.refused, res.during = f.admitted, f.refused, f.inPause
		if trace {
			var b strings.Builder
			for _, cl := range f.calls {
				mark := ""
				switch {
				case cl.during:
					mark = " refused, sent during a pause"
				case !cl.ok:
					mark = " refused"
				}
				fmt.Fprintf(&b, "sent %8.3f arrived %8.3f (second %d)%s\n", cl.sent.Sub(start).Seconds(), cl.arrived.Sub(start).Seconds(), cl.arrived.Unix()%100, mark)
			}
			for _, e := range events {
				fmt.Fprintln(&b, e)
			}
			res.log = b.String()
		}
	})
	return res
}

var fakeTrace = flag.String("fake.trace", "", "log the calls and events of the fake-time runs whose name contains this")

// TestFakeServerRefusingWithRetryInfo is TestServerRefusingWithRetryInfo
// in fake time, unary and streaming, at every 50 ms of start phase in the
// server's second, at latencies of 1 to 50 ms each way, with the answers
// of one wave coming back refusals first or in any order: at most the
// issue's 6 refusals — the 5 of the first wave, which meets a limit it
// cannot know, and the one that finds the window's length — where the
// round trip is short (a loopback's, as in the real-time test), and no
// call sent during a pause a refusal asked for.
//
// Where the round trip is long beside the pace the first refusal teaches
// (the first wave caught a window's last 50 ms: 5 calls in 50 ms and the
// way back), the next window's sixth call is not the only one sent before
// its refusal is back: one more refusal at 10 ms, up to 3 at 50 ms.
//
// And as fast as the server allows: the admitted calls fill
// ⌈admitted/limit⌉ windows, the first entered phase into its second,
// give or take a window. Beyond 10 ms, the first refusal's span counts
// the ways there and back, a pace up to a fifth too slow, which the
// creep has not undone in 60 calls: 1.1 s over at 20 ms, 3 s at 50 ms.
// The pace also leaves room for the jitter of the round trips (a percent
// at 10 ms: the window's tenth second ends 7 ms later than it did).
func TestFakeServerRefusingWithRetryInfo(t *testing.T) {
	type limit struct {
		refused int           // refusals at most
		slack   time.Duration // elapsed beyond the ideal at most
	}
	bound := map[time.Duration]limit{
		time.Millisecond:      {6, time.Second},
		5 * time.Millisecond:  {6, time.Second},
		10 * time.Millisecond: {7, 1100 * time.Millisecond},
		20 * time.Millisecond: {8, 1500 * time.Millisecond},
		50 * time.Millisecond: {9, 3500 * time.Millisecond},
	}
	for _, stream := range []bool{false, true} {
		for _, handler := range []time.Duration{200 * time.Microsecond, 0} {
			for _, latency := range []time.Duration{time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond} {
				for phase := time.Duration(0); phase < time.Second; phase += 50 * time.Millisecond {
					r := fakeRun{limit: 5, workers: 10, total: 60, phase: phase, latency: latency, handler: handler, stream: stream}
					t.Run(r.String(), func(t *testing.T) {
						res := r.run(t, *fakeTrace != "" && strings.Contains(t.Name(), *fakeTrace))
						t.Logf("%d admitted, %d refused, %d sent during a pause; %v", res.admitted, res.refused, res.during, res.elapsed)
						if res.log != "" {
							t.Log("\n" + res.log)
						}
						if res.admitted+res.refused != r.total {
							t.Errorf("%d calls reached the server, want %d", res.admitted+res.refused, r.total)
						}
						if res.refused > bound[latency].refused {
							t.Errorf("%d refused, want at most %d", res.refused, bound[latency].refused)
						}
						if res.during > 0 {
							t.Errorf("%d calls sent during a pause", res.during)
						}
						windows := (res.admitted + r.limit - 1) / r.limit
						if most := time.Duration(windows-1)*time.Second - phase + bound[latency].slack; res.elapsed > most {
							t.Errorf("took %v, want at most %v", res.elapsed, most)
						}
					})
				}
			}
		}
	}
}

// mdStream is an admitted stream whose header metadata are md.
type mdStream struct {
	fakeStream
	md metadata.MD
}

func (s *mdStream) Header() (metadata.MD, error) { return s.md, nil }

// TestStreamAdmissionTeaches: a stream counts as admitted when its first
// message comes, and the rate-limit fields of its header metadata teach
// the partition then: a quota at zero pauses it until its reset.
func TestStreamAdmissionTeaches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var paused []time.Time
		c := grpcthrottle.NewClient(grpcthrottle.WithObserver(func(e throttle.Event) {
			if e.Kind == throttle.EventPaused {
				paused = append(paused, e.Until)
			}
		}))
		defer c.Close()
		md := metadata.Pairs("x-ratelimit-limit", "5", "x-ratelimit-remaining", "0", "x-ratelimit-reset", "3")
		streamer := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			s := &mdStream{fakeStream: fakeStream{ctx: ctx, f: &fakeWindow{}, decided: make(chan struct{}), ok: true}, md: md}
			close(s.decided)
			return s, nil
		}
		desc := &grpc.StreamDesc{StreamName: "Watch", ServerStreams: true}
		s, err := c.Stream(context.Background(), desc, nil, watchMethod, streamer)
		if err != nil {
			t.Fatal(err)
		}
		if len(paused) != 0 {
			t.Fatalf("paused when the stream opened, before its header came: %v", paused)
		}
		start := time.Now()
		if err := s.RecvMsg(nil); err != nil {
			t.Fatal(err)
		}
		// (The reset is whole seconds: the gate allows a little slack.)
		if len(paused) != 1 || paused[0].Sub(start) < 3*time.Second || paused[0].Sub(start) > 3100*time.Millisecond {
			t.Fatalf("pauses %v, want one until 3 s after the first message (%v)", paused, start)
		}
		for s.RecvMsg(nil) == nil {
		}
	})
}
