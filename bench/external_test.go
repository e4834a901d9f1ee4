package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
)

// --- Interop with real rate limiters run as servers (nginx, HAProxy) ------

// externalCase is one configuration of a real rate limiter that a test
// started on loopback, and what the Transport must do against it.
type externalCase struct {
	name string
	// url is where the Transport goes; ctrlURL where the plain-client
	// control goes: the same place unless the limiter counts refusals
	// against the caller (then the control would leave it in debt).
	url, ctrlURL string
	ideal        time.Duration // the least time interopTotal successes take
	refuses      bool          // the limiter refuses (not only delays): the control must see it
	max429       int64         // bounds on the Transport's refusals
	ratio        float64       // and on elapsed ÷ ideal
	settle       time.Duration // the pause between the control and the Transport
}

// runExternal drives every case at once, as TestInteropWithPeerMiddlewares
// drives the peers (10 goroutines, interopTotal units, a refused unit
// retried at once): first a plain client until it has collected
// controlStop refusals (or two seconds have passed), then the Transport,
// with no limiter of its own. It then reports and judges each case.
func runExternal(t *testing.T, server string, cases []externalCase) {
	goroutinesSettle(t)
	type result struct {
		ctrl, thr       tally
		ctrlRun, thrRun interopRun
		events          []string
	}
	results := make([]*result, len(cases))
	var wg sync.WaitGroup
	for i, c := range cases {
		results[i] = new(result)
		res := results[i]
		wg.Go(func() {
			b := newBase()
			ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
			ctrlEnd := time.Now().Add(2 * time.Second)
			res.ctrlRun = interopDrive(ctx, &http.Client{Transport: countingTransport{b, &res.ctrl}}, c.ctrlURL,
				func() bool { return res.ctrl.limited.Load() >= controlStop || time.Now().After(ctrlEnd) })
			cancel()
			b.CloseIdleConnections()
			time.Sleep(c.settle)

			var (
				mu sync.Mutex
				t0 = time.Now()
			)
			tr := throttle.NewTransport(countingTransport{newBase(), &res.thr}, throttle.WithObserver(func(e throttle.Event) {
				mu.Lock()
				defer mu.Unlock()
				if e.Kind == throttle.EventPaused {
					res.events = append(res.events, fmt.Sprintf("%.3fs %d: pause until %.3fs", time.Since(t0).Seconds(), e.Status, e.Until.Sub(t0).Seconds()))
				}
			}))
			defer tr.Close()
			defer tr.CloseIdleConnections()
			// Long enough for any run the case's ratio allows to end
			// and be measured against it (a pace learned low on a
			// loaded machine was cut short by interopTimeout at 1.67×).
			ctx, cancel = context.WithTimeout(context.Background(), max(interopTimeout, 2*c.ideal+5*time.Second))
			defer cancel()
			run := interopDrive(ctx, &http.Client{Transport: tr}, c.url, nil)
			mu.Lock()
			res.thrRun = run
			mu.Unlock()
		})
	}
	wg.Wait()

	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := results[i]
			logHeader(t, "refused", res.ctrl.refused)
			t.Logf("control (plain http.Client): %d sent, %d refused, %d units done before it stopped at %d refusals or 2s",
				res.ctrl.sent.Load(), res.ctrl.limited.Load(), res.ctrlRun.ok, controlStop)
			t.Logf("Transport pauses: %s", strings.Join(res.events, "; "))
			run := res.thrRun
			t.Logf("Transport: %d sent, %d refused, %d units in %v; ideal %v (ratio %.2f)",
				res.thr.sent.Load(), res.thr.limited.Load(), run.ok, run.elapsed.Round(time.Millisecond),
				c.ideal, run.elapsed.Seconds()/c.ideal.Seconds())
			if res.ctrlRun.err != nil {
				t.Errorf("control: %v", res.ctrlRun.err)
			}
			if c.refuses && res.ctrl.limited.Load() < controlStop {
				t.Errorf("control: %d refusals without the Transport; %s does not limit as configured", res.ctrl.limited.Load(), server)
			}
			if run.err != nil || run.ok != interopTotal {
				t.Fatalf("Transport: %d of %d units: %v", run.ok, interopTotal, run.err)
			}
			if n := res.thr.other.Load(); n != 0 {
				t.Errorf("%d responses neither 200 nor a refusal", n)
			}
			if n := res.thr.limited.Load(); n > c.max429 {
				t.Errorf("%d refusals through the Transport; want ≤ %d", n, c.max429)
			}
			if r := run.elapsed.Seconds() / c.ideal.Seconds(); r > c.ratio {
				t.Errorf("elapsed %v, %.2f× the ideal %v; want ≤ %.2f×", run.elapsed.Round(time.Millisecond), r, c.ideal, c.ratio)
			}
		})
	}
}

// freeLoopbackPort returns a TCP port free on 127.0.0.1 just now.
func freeLoopbackPort(t *testing.T) int { return freeLoopbackPorts(t, 1)[0] }

// freeLoopbackPorts returns n distinct loopback ports free now: each is
// held until all are found (one closed before the next is asked for may
// be handed out again, and two frontends of a server that sets
// SO_REUSEPORT, as haproxy does, would then share one port and each
// other's traffic).
func freeLoopbackPorts(t *testing.T, n int) []int {
	ports := make([]int, n)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return ports
}

// startServer starts bin with args, stops it when t ends, and waits until
// it accepts connections on addr (failing t, with its output and the log
// file, if it exits first or 10 s pass).
func startServer(t *testing.T, addr, logFile, bin string, args ...string) {
	cmd := exec.Command(bin, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	said := func() string {
		log, _ := os.ReadFile(logFile)
		return out.String() + string(log)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		select {
		case <-exited:
			t.Fatalf("%s exited: %s", bin, said())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not listen on %s within 10s: %s", bin, addr, said())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
