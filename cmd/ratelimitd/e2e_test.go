package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/throttlekit/throttle/internal/testutil/redistest"
	"github.com/throttlekit/throttle/repository/ratelimitd"
)

// bin is the service binary the tests run, built by TestMain.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ratelimitd-e2e")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "ratelimitd")
	// go test puts its own go first on PATH.
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building ratelimitd: %v\n%s", err, out)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { os.RemoveAll(dir) }))
}

const policy = `default_plan: free
plans:
  free:
    default:
      limits:
        - {algorithm: fixed_window, limit: 5, window: 1h}
    endpoints:
      "POST /api/ask":
        limits:
          - {algorithm: sliding_log, limit: 3, window: 1h}
      "POST /count":
        limits:
          - {algorithm: fixed_window, limit: 100000, window: 1h}
`

const token = "e2e-token"

// proc is a running ratelimitd.
type proc struct {
	cmd  *exec.Cmd
	url  string
	mu   sync.Mutex
	logs bytes.Buffer
	done chan struct{}
	err  error // Wait's, once done is closed
}

var listening = regexp.MustCompile(`msg=listening addr=(\S+)`)

// launch starts the binary on a free loopback port with args and waits until
// it listens.
func launch(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{done: make(chan struct{})}
	p.cmd = exec.Command(bin, append([]string{"--addr", "127.0.0.1:0"}, args...)...)
	p.cmd.Env = append(os.Environ(), "RATELIMITD_ADMIN_TOKEN="+token)
	stderr, err := p.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.logs.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	select {
	case a := <-addr:
		p.url = "http://" + a
	case <-p.done:
		t.Fatalf("ratelimitd exited: %v\n%s", p.err, p.log())
	case <-time.After(30 * time.Second):
		t.Fatalf("ratelimitd did not listen within 30s\n%s", p.log())
	}
	return p
}

func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// waitLog waits until the log holds s.
func (p *proc) waitLog(t *testing.T, s string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(p.log(), s) < n {
		if time.Now().After(deadline) {
			t.Fatalf("log never said %q %d times:\n%s", s, n, p.log())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop sends SIGTERM and returns the exit code.
func (p *proc) stop(t *testing.T) int {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("ratelimitd did not stop within 30s")
	}
	return p.cmd.ProcessState.ExitCode()
}

func (p *proc) do(t *testing.T, method, path string, body []byte, hdr map[string]string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, p.url+path, bytes.NewReader(body))
	require.NoError(t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if out != nil {
		require.NoError(t, json.Unmarshal(data, out), "%s", data)
	}
	return resp.StatusCode
}

func (p *proc) check(t *testing.T, body string) ratelimitd.Result {
	t.Helper()
	var r ratelimitd.Result
	require.Equal(t, http.StatusOK, p.do(t, "POST", "/v1/check", []byte(body), nil, &r))
	return r
}

func writePolicy(t *testing.T, text string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "policy.yaml")
	require.NoError(t, os.WriteFile(f, []byte(text), 0o600))
	return f
}

// exercise drives one service through the API; it is the same for every
// backend.
func exercise(t *testing.T, p *proc, file string) {
	admin := map[string]string{"Authorization": "Bearer " + token}
	for i := range 3 {
		r := p.check(t, `{"key":"alice","endpoint":"POST /api/ask"}`)
		assert.Equal(t, []any{true, 3, 2 - i, "free", "POST /api/ask"}, []any{r.Allowed, r.Limit, r.Remaining, r.Policy, r.Rule})
	}
	r := p.check(t, `{"key":"alice","endpoint":"POST /api/ask"}`)
	assert.False(t, r.Allowed, "a refused check is HTTP 200 with allowed false")
	require.NotNil(t, r.RetryAfter)
	assert.Positive(t, *r.RetryAfter)
	assert.False(t, r.Final)
	require.Len(t, r.Limits, 1)
	assert.Equal(t, "POST /api/ask 3/1h", r.Limits[0].Name)

	var b ratelimitd.BatchResponse
	require.Equal(t, 200, p.do(t, "POST", "/v1/check/batch", []byte(`{"checks":[{"key":"bob"},{"key":"bob","cost":4},{"key":"bob"}]}`), nil, &b))
	require.Len(t, b.Results, 3)
	assert.Equal(t, []bool{true, true, false}, []bool{b.Results[0].Allowed, b.Results[1].Allowed, b.Results[2].Allowed})

	var st ratelimitd.Result
	require.Equal(t, 200, p.do(t, "GET", "/v1/state/bob", nil, nil, &st))
	assert.Equal(t, 0, st.Remaining)

	// Bad input.
	var pr ratelimitd.Problem
	assert.Equal(t, 413, p.do(t, "POST", "/v1/check/batch", bytes.Repeat([]byte("x"), 2<<20), nil, &pr))
	assert.Equal(t, 400, p.do(t, "POST", "/v1/check", []byte(`{"key":"a",`), nil, &pr))
	assert.Contains(t, pr.Detail, "malformed JSON")
	assert.Equal(t, 400, p.do(t, "POST", "/v1/check", []byte(`{"key":"a","costs":1}`), nil, &pr))
	assert.Contains(t, pr.Detail, "unknown field")

	// An unauthorised reset changes nothing; an authorised one does.
	assert.Equal(t, 401, p.do(t, "DELETE", "/v1/state/alice", nil, nil, &pr))
	assert.False(t, p.check(t, `{"key":"alice","endpoint":"POST /api/ask","cost":0}`).Remaining > 0)
	assert.Equal(t, 200, p.do(t, "DELETE", "/v1/state/alice", nil, admin, nil))
	assert.True(t, p.check(t, `{"key":"alice","endpoint":"POST /api/ask"}`).Allowed)

	// A bad file, over HTTP and by SIGHUP: refused with its position, and
	// the policy in force stays.
	require.NoError(t, os.WriteFile(file, []byte(strings.Replace(policy, "limit: 5, window: 1h", "limit: 5, window: 3600", 1)), 0o600))
	assert.Equal(t, 422, p.do(t, "POST", "/v1/policies/reload", nil, admin, &pr))
	assert.Equal(t, 6, pr.Line)
	assert.Contains(t, pr.Detail, "window")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGHUP))
	p.waitLog(t, "policy reload failed", 2)
	assert.Equal(t, 5, p.check(t, `{"key":"carol"}`).Limit)
	assert.Equal(t, 401, p.do(t, "POST", "/v1/policies/reload", nil, nil, &pr))

	// A good file by SIGHUP.
	require.NoError(t, os.WriteFile(file, []byte(strings.Replace(policy, "limit: 5, window: 1h", "limit: 7, window: 1h", 1)), 0o600))
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGHUP))
	p.waitLog(t, "policy loaded", 2)
	assert.Equal(t, 7, p.check(t, `{"key":"carol"}`).Limit)
	var info struct {
		File  string `json:"file"`
		Plans map[string]any
	}
	require.Equal(t, 200, p.do(t, "GET", "/v1/policies", nil, nil, &info))
	assert.Equal(t, file, info.File)

	// Idempotency.
	idem := map[string]string{"Idempotency-Key": "once"}
	var first, again ratelimitd.Result
	require.Equal(t, 200, p.do(t, "POST", "/v1/check", []byte(`{"key":"dan"}`), idem, &first))
	require.Equal(t, 200, p.do(t, "POST", "/v1/check", []byte(`{"key":"dan"}`), idem, &again))
	assert.Equal(t, first, again)
	assert.Equal(t, first.Remaining-1, p.check(t, `{"key":"dan"}`).Remaining, "the retry was not counted")

	assert.Equal(t, 200, p.do(t, "GET", "/healthz", nil, nil, nil))
	assert.Equal(t, 200, p.do(t, "GET", "/readyz", nil, nil, nil))
	assert.Equal(t, 0, p.stop(t))
	assert.Contains(t, p.log(), "msg=stopped")
}

func TestMemory(t *testing.T) {
	file := writePolicy(t, policy)
	exercise(t, launch(t, "--policy", file), file)
}

func TestRedis(t *testing.T) {
	s := redistest.Start(t)
	file := writePolicy(t, policy)
	exercise(t, launch(t, "--policy", file, "--redis-url", "redis://"+s.Addr+"/0"), file)
}

func TestRedisCluster(t *testing.T) {
	c := redistest.StartCluster(t)
	a := c.Addrs()
	file := writePolicy(t, policy)
	url := "redis://" + a[0] + "?addr=" + a[1] + "&addr=" + a[2]
	p, q := launch(t, "--policy", file, "--redis-url", url), launch(t, "--policy", file, "--redis-url", url)
	// Two replicas share each key's quota: 5 in all.
	allowed := 0
	for i := range 8 {
		for _, r := range []*proc{p, q} {
			if r.check(t, fmt.Sprintf(`{"key":"k%d"}`, i%2)).Allowed {
				allowed++
			}
		}
	}
	assert.Equal(t, 10, allowed, "two keys, 5 each, across both replicas")
	assert.Equal(t, 200, p.do(t, "GET", "/readyz", nil, nil, nil))
	assert.Equal(t, 0, p.stop(t))
	assert.Equal(t, 0, q.stop(t))
}

func TestDefaultPolicy(t *testing.T) {
	p := launch(t)
	r := p.check(t, `{"key":"x","endpoint":"POST /api/ask"}`)
	assert.Equal(t, []any{true, "free", "POST /api/ask"}, []any{r.Allowed, r.Policy, r.Rule})
	assert.Equal(t, 0, p.stop(t))
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--fail-mode", "maybe"}, {"--redis-url", "://"}, {"--nope"}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "%v: %s", args, out)
		assert.Equal(t, 2, ee.ExitCode(), "%v: %s", args, out)
	}
	out, err := exec.Command(bin, "--policy", filepath.Join(t.TempDir(), "missing.yaml")).CombinedOutput()
	assert.Error(t, err)
	assert.Contains(t, string(out), "missing.yaml")
}

// TestSIGTERMUnderLoad stops a Redis-backed service while clients hammer
// it: it exits 0, every check answered was counted, and every check counted
// was answered (a second service finds exactly that many spent).
func TestSIGTERMUnderLoad(t *testing.T) {
	s := redistest.Start(t)
	file := writePolicy(t, policy)
	url := "redis://" + s.Addr
	p := launch(t, "--policy", file, "--redis-url", url)
	var answered, bad atomic.Int64
	var wg sync.WaitGroup
	stopped := make(chan struct{})
	body := []byte(`{"key":"load","endpoint":"POST /count"}`)
	for range 16 {
		wg.Go(func() {
			for {
				resp, err := http.Post(p.url+"/v1/check", "application/json", bytes.NewReader(body))
				if err != nil {
					// No answer: the request was refused, or its
					// connection closed while idle; the service never read
					// it, which the final count checks.
					select {
					case <-stopped:
						return
					default:
						continue
					}
				}
				var r ratelimitd.Result
				err = json.NewDecoder(resp.Body).Decode(&r)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || !r.Allowed {
					t.Logf("bad answer: %d %v %+v", resp.StatusCode, err, r)
					bad.Add(1)
					continue
				}
				answered.Add(1)
			}
		})
	}
	for answered.Load() < 500 {
		time.Sleep(5 * time.Millisecond)
	}
	code := p.stop(t)
	close(stopped)
	wg.Wait()
	assert.Equal(t, 0, code)
	assert.Zero(t, bad.Load())

	q := launch(t, "--policy", file, "--redis-url", url)
	var st ratelimitd.Result
	require.Equal(t, 200, q.do(t, "GET", "/v1/state/load?endpoint=POST+/count", nil, nil, &st))
	assert.Equal(t, answered.Load(), int64(st.Limit-st.Remaining), "checks counted == checks answered")
}

// TestSlowClient: a client that sends its headers slowly (slowloris) is
// cut off after --header-timeout, and checks meanwhile are answered.
func TestSlowClient(t *testing.T) {
	p := launch(t, "--header-timeout", "300ms")
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.url, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write([]byte("POST /v1/check HTTP/1.1\r\nHost: x\r\n"))
	require.NoError(t, err)
	assert.True(t, p.check(t, `{"key":"s"}`).Allowed)
	start := time.Now()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = io.ReadAll(conn) // the server closes the connection
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 5*time.Second, "cut off by the header timeout, not the test's deadline")
	assert.Equal(t, 0, p.stop(t))
}

// TestNoLogPerRequest: checks, good and bad, write no log lines.
func TestNoLogPerRequest(t *testing.T) {
	p := launch(t, "--policy", writePolicy(t, policy))
	before := p.log()
	for range 20 {
		p.check(t, `{"key":"quiet"}`)
		var pr ratelimitd.Problem
		p.do(t, "POST", "/v1/check", []byte(`{`), nil, &pr)
	}
	assert.Equal(t, before, p.log())
	assert.Equal(t, 0, p.stop(t))
}
