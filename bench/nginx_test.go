package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
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
// without nginx on PATH (or in /usr/sbin) unless THROTTLE_REQUIRE_PROXIES
// is set, as `make test` does after installing it.

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
	// They are outcome bounds with room for a loaded machine: make test
	// must pass on 2 cores beside two CPU-bound processes, where these
	// real-time runs have shown 13 refusals and 1.27× (10 a second), 13
	// and 1.13× (burst 5), 13 and 1.43× (20 a second). What a quiet
	// machine does is logged by each run and kept in bench/README.md.
	max429 int64
	ratio  float64
}

var nginxCases = []nginxCase{
	// 1.05× in five runs at f5d11eb (1.09–1.10× while slow start, ended
	// by its first doubling, went back to its guess with a second margin:
	// 9.1 a second). When one answer that got through is
	// counted before the first refusal (a loaded machine), the guess
	// rests on 9 in flight (8.6 a second; its first pause was 117 ms) and
	// the refusal is no burst; slow start's double is refused and the pace
	// went back to the guess with a further margin, 8.2 a second, from
	// which the creep gains little in 12 s: 1.21× (one make test run,
	// before that margin was dropped).
	// In one fresh-clone CI run of six on 2026-11-26 (the machine loaded
	// by the run itself) only six of the first wave were refused, the
	// guess came out lower still, and the pace stayed near 5.5 a second:
	// 111 units in the 20 s the run then had, 1.67×. The creep (aimdGain,
	// 1 % a run of 20) is what is slow; a slow start ended after one
	// doubling is not searched (the guess is taken as about right). Held
	// to 1.8× for that; issue 18's note has it.
	{name: "10rps-no-burst-503", rate: 10, conf: "limit_req zone=%s;", max429: 20, ratio: 1.8},
	// Six get through at once and four of the first ten are refused: a
	// burst smaller than what was sent at once, so the Transport searches
	// from its guess (1.04–1.09×). When a refusal of the second wave happens to
	// be counted first, it takes the six for a burst the whole wave got
	// through and holds the host two seconds (1.20×).
	{name: "10rps-burst-5-nodelay-429", rate: 10, conf: "limit_req zone=%s burst=5 nodelay; limit_req_status 429;", burst: 5, max429: 20, ratio: 1.6},
	{name: "10rps-burst-10-delayed", rate: 10, conf: "limit_req zone=%s burst=10;", max429: 0, ratio: 1.2},
	// Twice the rate the pace's first guess makes of 10 requests in
	// flight (10 a second): slow start finds it (1.5× before it, when
	// the pace crept up from the guess by a fifth every 20 successes),
	// at the cost of a few more refusals.
	{name: "20rps-no-burst-503", rate: 20, conf: "limit_req zone=%s;", max429: 24, ratio: 1.8},
}

// startNginx writes a configuration with one location per case under dir
// and starts nginx on a free loopback port; it returns the base URL.
func startNginx(t *testing.T, bin string) string {
	dir := t.TempDir()
	port := freeLoopbackPort(t)
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
	addr := "127.0.0.1:" + strconv.Itoa(port)
	startServer(t, addr, filepath.Join(dir, "error.log"), bin, "-p", dir, "-c", path, "-e", filepath.Join(dir, "error.log"))
	return "http://" + addr
}

// proxyBinary finds the server bin (on PATH or in /usr/sbin), or skips t
// (fails it when THROTTLE_REQUIRE_PROXIES is set, as make test does after
// installing Debian's package pkg).
func proxyBinary(t *testing.T, bin, pkg string) string {
	if p, err := exec.LookPath(bin); err == nil {
		return p
	}
	if p := "/usr/sbin/" + bin; fileExists(p) {
		return p
	}
	if os.Getenv("THROTTLE_REQUIRE_PROXIES") != "" {
		t.Fatalf("%s not found and THROTTLE_REQUIRE_PROXIES is set (make test installs it: apt-get install %s)", bin, pkg)
	}
	t.Skipf("%s not found: install it (apt-get install %s) or run make test", bin, pkg)
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestInteropWithNginx: see the comment at the top of the file. The cases
// run at the same time, each on its own location and zone.
func TestInteropWithNginx(t *testing.T) {
	base := startNginx(t, proxyBinary(t, "nginx", "nginx-light"))
	var cases []externalCase
	for _, c := range nginxCases {
		url := base + "/" + c.name + "/ok.txt"
		cases = append(cases, externalCase{
			name: c.name, url: url, ctrlURL: url,
			ideal:   time.Duration(interopTotal-1-c.burst) * time.Second / time.Duration(c.rate),
			refuses: c.max429 > 0, max429: c.max429, ratio: c.ratio,
			// nginx counts only what it lets through: the control's debt
			// is at most one request.
			settle: time.Second,
		})
	}
	runExternal(t, "nginx", cases)
}
