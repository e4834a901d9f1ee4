// Package redistest starts real redis-server processes for tests: a single
// node, a three-master Redis Cluster, or a master and a replica watched by
// Redis Sentinel, on free loopback ports, stopped when the test (or the
// test binary) ends.
//
// Without redis-server on PATH the helpers skip the calling test with a line
// saying how to run it, unless the environment variable
// THROTTLE_REQUIRE_REDIS=1 is set (make test and CI set it): then they fail.
package redistest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// RequireEnv is the environment variable that turns a missing redis-server
// into a test failure instead of a skip.
const RequireEnv = "THROTTLE_REQUIRE_REDIS"

// Need skips t (or fails it, when RequireEnv is "1") unless redis-server and
// redis-cli are on PATH.
func Need(t testing.TB) {
	t.Helper()
	_, err1 := exec.LookPath("redis-server")
	_, err2 := exec.LookPath("redis-cli")
	if err1 == nil && err2 == nil {
		return
	}
	msg := "redis-server/redis-cli not on PATH: install them (apt-get install redis-server) to run the Redis suites, or run make test"
	if os.Getenv(RequireEnv) == "1" {
		t.Fatal(msg + " (" + RequireEnv + "=1 forbids skipping)")
	}
	t.Skip(msg)
}

// Server is one running redis-server.
type Server struct {
	Addr string // host:port on loopback
	Port int
	dir  string
	conf string // a config file, for a sentinel; empty for a plain server
	args []string
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts a redis-server on a free loopback port and stops it when t
// ends. Extra arguments are passed to redis-server.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	Need(t)
	s, err := Launch(t.TempDir(), extra...)
	if err != nil {
		t.Fatalf("redistest: start redis-server: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Launch starts a redis-server on a free loopback port, its files in dir,
// for a program rather than a test (the fleet demo): the caller calls
// Stop. Extra arguments are passed to redis-server.
func Launch(dir string, extra ...string) (*Server, error) {
	return launch(&Server{dir: dir, args: extra})
}

// launch starts s on a free loopback port.
func launch(s *Server) (*Server, error) {
	var err error
	for range 20 { // a port found free may be taken before redis binds it: retry
		var port int
		if port, err = freePort(); err != nil {
			continue
		}
		s.Port, s.Addr = port, net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if err = s.start(); err == nil {
			return s, nil
		}
	}
	return nil, err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) start() error {
	var args []string
	if s.conf != "" {
		args = append(args, s.conf) // redis-server takes its config file first
	}
	args = append(args,
		"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir,
		"--protected-mode", "no", "--enable-debug-command", "local")
	args = append(args, s.args...)
	cmd := exec.Command("redis-server", args...)
	logf, err := os.Create(filepath.Join(s.dir, fmt.Sprintf("redis-%d.log", time.Now().UnixNano())))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			b, _ := os.ReadFile(logf.Name())
			return fmt.Errorf("redis-server exited: %s", lastLine(string(b)))
		default:
		}
		if ping(s.Addr) == nil {
			s.mu.Lock()
			s.cmd, s.done = cmd, done
			s.mu.Unlock()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Kill()
	<-done
	return fmt.Errorf("redis-server on %s did not answer PING", s.Addr)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// ping sends PING over a raw connection and waits for +PONG.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("redistest: PING answered %q", line)
	}
	return nil
}

// Stop kills the server and waits for it to exit. It is idempotent.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-done
}

// Restart starts the server again on the same port (after Stop), with an
// empty data set.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	var err error
	for range 50 { // the port may linger briefly after the kill
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("redistest: restart on %s: %v", s.Addr, err)
}

// Cluster is a running three-master Redis Cluster.
type Cluster struct {
	Masters []*Server
}

// Addrs are the masters' addresses, for redis.ClusterOptions.
func (c *Cluster) Addrs() []string { return addrs(c.Masters) }

func addrs(servers []*Server) []string {
	a := make([]string, len(servers))
	for i, s := range servers {
		a[i] = s.Addr
	}
	return a
}

// StartCluster starts three cluster-enabled redis-servers on free loopback
// ports, joins them with redis-cli --cluster create, waits until the cluster
// is ok, and stops them when t ends.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	Need(t)
	c := &Cluster{}
	for range 3 {
		c.Masters = append(c.Masters, Start(t, "--cluster-enabled", "yes",
			"--cluster-node-timeout", "2000", "--cluster-require-full-coverage", "no"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, m := range c.Masters {
		wait(ctx, t, "cluster on "+m.Addr+" ok", func() (string, bool) {
			out, err := cli(ctx, m, "CLUSTER", "INFO")
			return out, err == nil && strings.Contains(out, "cluster_state:ok")
		})
	}
	return c
}
