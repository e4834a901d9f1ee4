package redistest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// ToxiproxyVersion is the Toxiproxy (github.com/Shopify/toxiproxy/v2) whose
// server the fault suites run.
const ToxiproxyVersion = "v2.5.0"

// ToxiproxyEnv names a toxiproxy-server binary to use; without it the test
// set-up builds one from its Go module (go install, once per machine, into
// the user's cache directory). make test builds it into bin/ and sets it.
const ToxiproxyEnv = "THROTTLE_TOXIPROXY"

var buildOnce struct {
	sync.Once
	path string
	err  error
}

// toxiproxyBinary returns the path of a toxiproxy-server binary, building
// it if need be.
func toxiproxyBinary() (string, error) {
	if p := os.Getenv(ToxiproxyEnv); p != "" {
		return p, nil
	}
	buildOnce.Do(func() {
		cache, err := os.UserCacheDir()
		if err != nil {
			cache = os.TempDir()
		}
		dir := filepath.Join(cache, "throttle-toxiproxy-"+ToxiproxyVersion)
		bin := filepath.Join(dir, "server")
		if _, err := os.Stat(bin); err == nil {
			buildOnce.path = bin
			return
		}
		goCmd, err := exec.LookPath("go")
		if err != nil {
			buildOnce.err = fmt.Errorf("redistest: no toxiproxy-server (%s unset) and no go command to build it: %w", ToxiproxyEnv, err)
			return
		}
		cmd := exec.Command(goCmd, "install", "github.com/Shopify/toxiproxy/v2/cmd/server@"+ToxiproxyVersion)
		cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildOnce.err = fmt.Errorf("redistest: build toxiproxy-server: %v\n%s", err, out)
			return
		}
		buildOnce.path = bin
	})
	return buildOnce.path, buildOnce.err
}

// Toxiproxy is a running toxiproxy-server on loopback, driven through its
// HTTP API: a TCP proxy that injects faults (toxics) between a client and a
// server.
type Toxiproxy struct {
	api  string // http://127.0.0.1:port
	cmd  *exec.Cmd
	done chan struct{}
}

// StartToxiproxy starts a toxiproxy-server on a free loopback port and
// stops it when t ends. Without a binary (and without the means to build
// one) it skips t, or fails it when RequireEnv is "1".
func StartToxiproxy(t testing.TB) *Toxiproxy {
	t.Helper()
	bin, err := toxiproxyBinary()
	if err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	var lastErr error
	for range 5 { // a free port may be taken before the server binds it
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		tp := &Toxiproxy{api: "http://127.0.0.1:" + strconv.Itoa(port), done: make(chan struct{})}
		tp.cmd = exec.Command(bin, "-host", "127.0.0.1", "-port", strconv.Itoa(port))
		tp.cmd.Env = append(os.Environ(), "LOG_LEVEL=fatal")
		if err := tp.cmd.Start(); err != nil {
			t.Fatalf("redistest: start toxiproxy-server: %v", err)
		}
		go func() { tp.cmd.Wait(); close(tp.done) }()
		if lastErr = tp.waitReady(10 * time.Second); lastErr == nil {
			t.Cleanup(tp.stop)
			return tp
		}
		tp.stop()
	}
	t.Fatalf("redistest: toxiproxy-server never answered: %v", lastErr)
	return nil
}

func (tp *Toxiproxy) waitReady(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		select {
		case <-tp.done:
			return fmt.Errorf("exited")
		default:
		}
		err := tp.do(http.MethodGet, "/version", nil, nil)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (tp *Toxiproxy) stop() {
	if tp.cmd.Process != nil {
		tp.cmd.Process.Kill()
	}
	<-tp.done
}

// do calls the API: method path with body as JSON, its answer into out.
func (tp *Toxiproxy) do(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, tp.api+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := apiClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("redistest: toxiproxy %s %s: %s: %s", method, path, resp.Status, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// apiClient keeps no idle connection (and so no goroutine) to the API.
var apiClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// Proxy is one proxy of a Toxiproxy: Addr forwards to the upstream.
type Proxy struct {
	tp   *Toxiproxy
	Name string
	Addr string // host:port on loopback the clients dial
}

// Proxy makes a proxy named name from a free loopback port to upstream.
func (tp *Toxiproxy) Proxy(t testing.TB, name, upstream string) *Proxy {
	t.Helper()
	var out struct {
		Listen string `json:"listen"`
	}
	err := tp.do(http.MethodPost, "/proxies", map[string]any{
		"name": name, "listen": "127.0.0.1:0", "upstream": upstream, "enabled": true}, &out)
	if err != nil {
		t.Fatal(err)
	}
	return &Proxy{tp: tp, Name: name, Addr: out.Listen}
}

// Toxic is a fault: Type is latency, timeout, reset_peer, slicer,
// bandwidth, slow_close or limit_data; Stream "downstream" (server to
// client, the default) or "upstream"; Attributes as Toxiproxy's README
// documents them (latency, jitter; timeout; rate; average_size,
// size_variation, delay...).
type Toxic struct {
	Name       string         `json:"name"`
	Type       string         `json:"type"`
	Stream     string         `json:"stream,omitempty"`
	Toxicity   float32        `json:"toxicity"`
	Attributes map[string]any `json:"attributes"`
}

// Add adds toxic (at toxicity 1 unless set) to the proxy.
func (p *Proxy) Add(t testing.TB, toxic Toxic) {
	t.Helper()
	if toxic.Toxicity == 0 {
		toxic.Toxicity = 1
	}
	if toxic.Name == "" {
		toxic.Name = toxic.Type + "_" + toxic.Stream
	}
	if err := p.tp.do(http.MethodPost, "/proxies/"+p.Name+"/toxics", toxic, nil); err != nil {
		t.Fatal(err)
	}
}

// Remove removes the toxic named name.
func (p *Proxy) Remove(t testing.TB, name string) {
	t.Helper()
	if err := p.tp.do(http.MethodDelete, "/proxies/"+p.Name+"/toxics/"+name, nil, nil); err != nil {
		t.Fatal(err)
	}
}

// Enable and Disable open and close the proxy: disabled, it refuses
// connections and drops those it has (Redis unreachable).
func (p *Proxy) Enable(t testing.TB)  { t.Helper(); p.set(t, true) }
func (p *Proxy) Disable(t testing.TB) { t.Helper(); p.set(t, false) }

func (p *Proxy) set(t testing.TB, enabled bool) {
	t.Helper()
	if err := p.tp.do(http.MethodPost, "/proxies/"+p.Name, map[string]any{"enabled": enabled}, nil); err != nil {
		t.Fatal(err)
	}
}
