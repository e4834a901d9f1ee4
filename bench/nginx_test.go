package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
)

// --- Interop: throttle.Transport against nginx's limit_req ----------------
//
// The rate limiter most servers on the Internet sit behind, as it ships:
// a real nginx (started by the test on a free loopback port, serving a
// static file) with ngx_http_limit_req_module at 10 requests a second per
// client address (issue 11's rate for header-less servers), in the
// configurations its documentation shows, and at 20 a second. It says
// nothing but the status: a bare 503 (or 429 with limit_req_status), no
// Retry-After, no quota fields. The same workload as
// TestInteropWithPeerMiddlewares (10 goroutines, 120 units, a refused unit
// retried at once) must finish with few refusals and near the ideal: what
// the Transport learns from bare refusals alone (issue 11's AIMD pace).
//
// nginx's limit_req is a leaky bucket measured in milliseconds: with no
// burst a request is refused if it comes less than 1/rate after the last
// one it let through; burst=b nodelay lets b more through at once and
// refuses past that; burst=b (without nodelay) holds up to b excess
// requests in the server and lets them through at the rate. The test skips
// without nginx on PATH (or in /usr/sbin) unless THROTTLE_REQUIRE_NGINX is
// set, as `make test` does after installing it.

// nginxCase is one location of the test's nginx.
type nginxCase struct {
	name string
	rate int // limit_req's rate, per second
	// conf is the location's limit_req directives; the zone is the
	// case's own.
	conf string
	// burst is what the server lets through at once beyond the rate
	// (nodelay), for the ideal time.
	burst int
	// max429 and ratio bound the Transport's refusals and elapsed/ideal.
	max429 int64
	ratio  float64
}

var nginxCases = []nginxCase{
	{name: "10rps-no-burst-503", rate: 10, conf: "limit_req zone=%s;", max429: 12, ratio: 1.15},
	// When the first refusal ends a burst (the six nginx lets through
	// at once), the pace holds the host two seconds in case the server
	// counts refusals against the next window (aimdHold): this one does
	// not, and the hold costs up to 1.2× (1.03× when the answers come
	// back in an order that shows no burst).
	{name: "10rps-burst-5-nodelay-429", rate: 10, conf: "limit_req zone=%s burst=5 nodelay; limit_req_status 429;", burst: 5, max429: 10, ratio: 1.25},
	{name: "10rps-burst-10-delayed", rate: 10, conf: "limit_req zone=%s burst=10;", max429: 0, ratio: 1.05},
	// Twice the rate the pace's first guess makes of 10 requests in
	// flight (10 a second): slow start finds it (1.5× before it, when
	// the pace crept up from the guess by a fifth every 20 successes),
	// at the cost of a few more refusals.
	{name: "20rps-no-burst-503", rate: 20, conf: "limit_req zone=%s;", max429: 16, ratio: 1.35},
}

// startNginx writes a configuration with one location per case under dir
// and starts nginx on a free loopback port; it returns the base URL.
func startNginx(t *testing.T, bin string) string {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	var zones, locs strings.Builder
	for i, c := range nginxCases {
		zone := "z" + strconv.Itoa(i)
		fmt.Fprintf(&zones, "  limit_req_zone $binary_remote_addr zone=%s:1m rate=%dr/s;\n", zone, c.rate)
		fmt.Fprintf(&locs, "    location /%s/ { %s }\n", c.name, fmt.Sprintf(c.conf, zone))
		if err := os.MkdirAll(filepath.Join(dir, "www", c.name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "www", c.name, "ok.txt"), okBody, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	conf := fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path %[1]s/tmp;
  proxy_temp_path %[1]s/tmp;
  fastcgi_temp_path %[1]s/tmp;
  uwsgi_temp_path %[1]s/tmp;
  scgi_temp_path %[1]s/tmp;
%[2]s  server {
    listen 127.0.0.1:%[3]d;
    root %[1]s/www;
%[4]s  }
}
`, dir, zones.String(), port, locs.String())
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", path, "-e", filepath.Join(dir, "error.log"))
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
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx exited: %s%s", out.String(), log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx did not listen on %s within 10s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "http://" + addr
}

// nginxBinary finds nginx, or skips t (fails it when
// THROTTLE_REQUIRE_NGINX is set).
func nginxBinary(t *testing.T) string {
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx"
	}
	if os.Getenv("THROTTLE_REQUIRE_NGINX") != "" {
		t.Fatal("nginx not found and THROTTLE_REQUIRE_NGINX is set (make test installs it: apt-get install nginx-light)")
	}
	t.Skip("nginx not found: install it (apt-get install nginx-light) or run make test")
	return ""
}

// TestInteropWithNginx: see the comment at the top of the file. The cases
// run at the same time, each on its own location and zone.
func TestInteropWithNginx(t *testing.T) {
	base := startNginx(t, nginxBinary(t))
	goroutinesSettle(t)
	type result struct {
		ctrl, thr       tally
		ctrlRun, thrRun interopRun
		events          []string
	}
	results := make([]*result, len(nginxCases))
	var wg sync.WaitGroup
	for i, c := range nginxCases {
		results[i] = new(result)
		res := results[i]
		url := base + "/" + c.name + "/ok.txt"
		wg.Go(func() {
			b := newBase()
			ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
			// The control stops once it has made its point, or after two
			// seconds (nginx delays what burst=10 holds: nothing refused).
			ctrlEnd := time.Now().Add(2 * time.Second)
			res.ctrlRun = interopDrive(ctx, &http.Client{Transport: countingTransport{b, &res.ctrl}}, url,
				func() bool { return res.ctrl.limited.Load() >= controlStop || time.Now().After(ctrlEnd) })
			cancel()
			b.CloseIdleConnections()
			time.Sleep(time.Second) // the control's debt drains (at most one request: nginx counts only what it lets through)

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
			ctx, cancel = context.WithTimeout(context.Background(), interopTimeout)
			defer cancel()
			run := interopDrive(ctx, &http.Client{Transport: tr}, url, nil)
			mu.Lock()
			res.thrRun = run
			mu.Unlock()
		})
	}
	wg.Wait()

	for i, c := range nginxCases {
		t.Run(c.name, func(t *testing.T) {
			res := results[i]
			ideal := time.Duration(interopTotal-1-c.burst) * time.Second / time.Duration(c.rate)
			logHeader(t, "refused", res.ctrl.refused)
			t.Logf("control (plain http.Client): %d sent, %d refused, %d units done before it stopped at %d refusals",
				res.ctrl.sent.Load(), res.ctrl.limited.Load(), res.ctrlRun.ok, controlStop)
			t.Logf("Transport pauses: %s", strings.Join(res.events, "; "))
			run := res.thrRun
			t.Logf("Transport: %d sent, %d refused, %d units in %v; ideal %v (ratio %.2f)",
				res.thr.sent.Load(), res.thr.limited.Load(), run.ok, run.elapsed.Round(time.Millisecond),
				ideal, run.elapsed.Seconds()/ideal.Seconds())
			if res.ctrlRun.err != nil {
				t.Errorf("control: %v", res.ctrlRun.err)
			}
			if c.max429 > 0 && res.ctrl.limited.Load() < controlStop {
				t.Errorf("control: %d refusals without the Transport; nginx does not limit as configured", res.ctrl.limited.Load())
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
			if r := run.elapsed.Seconds() / ideal.Seconds(); r > c.ratio {
				t.Errorf("elapsed %v, %.2f× the ideal %v; want ≤ %.2f×", run.elapsed.Round(time.Millisecond), r, ideal, c.ratio)
			}
		})
	}
}
