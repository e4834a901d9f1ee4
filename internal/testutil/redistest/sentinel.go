package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// MasterName is the name under which StartSentinel's sentinels monitor the
// master: redis.FailoverOptions.MasterName.
const MasterName = "mymaster"

// Sentinel is a master, one replica of it, and the sentinels that watch
// them and promote the replica when the master fails.
type Sentinel struct {
	Master    *Server // the master when StartSentinel returns
	Replica   *Server // its replica, the master after a failover
	Sentinels []*Server
}

// Addrs are the sentinels' addresses: redis.FailoverOptions.SentinelAddrs.
func (s *Sentinel) Addrs() []string { return addrs(s.Sentinels) }

// StartSentinel starts a master, a replica of it (--replicaof) and n
// sentinels (redis-server --sentinel) that monitor it as MasterName with a
// quorum of a majority of them, a master taken for down after 500ms without
// an answer and a 4s failover timeout. It returns once every sentinel knows
// the replica and the other sentinels and can authorize a failover (SENTINEL
// CKQUORUM), and stops every process when t ends.
func StartSentinel(t testing.TB, n int) *Sentinel {
	t.Helper()
	Need(t)
	s := &Sentinel{Master: Start(t, "--repl-diskless-sync-delay", "0")} // sync the replica at once, not after 5s
	s.Replica = Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(s.Master.Port))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A sentinel learns the replicas from the master's INFO when it connects,
	// and only every 10s after that: start the sentinels once the replica is
	// attached, so that they know it at once. Attached means it has what the
	// master wrote: a link "up" right after the first sync may not stream
	// yet (and WAIT may already count it), so advance the master's offset
	// (PUBLISH is replicated and leaves no key) until the replica reaches it.
	wait(ctx, t, "replica "+s.Replica.Addr+" in sync", func() (string, bool) {
		_, err1 := cli(ctx, s.Master, "PUBLISH", "redistest:sync", "")
		m, err2 := cli(ctx, s.Master, "INFO", "replication")
		r, err3 := cli(ctx, s.Replica, "INFO", "replication")
		mo, ro := infoInt(m, "master_repl_offset"), infoInt(r, "slave_repl_offset")
		return m + r, err1 == nil && err2 == nil && err3 == nil && mo > 0 && ro >= mo
	})
	conf := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d %d\n"+
		"sentinel down-after-milliseconds %[1]s 500\n"+
		"sentinel failover-timeout %[1]s 4000\n", MasterName, s.Master.Port, n/2+1)
	for range n {
		dir := t.TempDir()
		path := filepath.Join(dir, "sentinel.conf") // the sentinel rewrites it: one each
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		sn, err := launch(&Server{dir: dir, conf: path, args: []string{"--sentinel"}})
		if err != nil {
			t.Fatalf("redistest: start a sentinel: %v", err)
		}
		t.Cleanup(sn.Stop)
		s.Sentinels = append(s.Sentinels, sn)
	}
	usable := fmt.Sprintf("OK %d usable", n)
	for _, sn := range s.Sentinels {
		wait(ctx, t, "sentinel "+sn.Addr+" ready", func() (string, bool) {
			q, err1 := cli(ctx, sn, "SENTINEL", "CKQUORUM", MasterName)
			r, err2 := cli(ctx, sn, "SENTINEL", "REPLICAS", MasterName)
			return q + r, err1 == nil && err2 == nil && strings.HasPrefix(q, usable) &&
				strings.Contains(r, "\nflags\nslave\n") && strings.Contains(r, "\nmaster-link-status\nok\n")
		})
	}
	return s
}

// MasterAddr is the master's address as the first sentinel names it.
func (s *Sentinel) MasterAddr(ctx context.Context) (string, error) {
	return masterAddr(ctx, s.Sentinels[0])
}

// WaitPromoted waits until the replica says it is a master and every
// sentinel names it as the master, failing t after timeout.
func (s *Sentinel) WaitPromoted(t testing.TB, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	wait(ctx, t, "replica "+s.Replica.Addr+" promoted", func() (string, bool) {
		seen, err := cli(ctx, s.Replica, "ROLE")
		ok := err == nil && strings.HasPrefix(seen, "master\n")
		for _, sn := range s.Sentinels {
			addr, err := masterAddr(ctx, sn)
			seen += fmt.Sprintf("sentinel %s names %q (%v)\n", sn.Addr, addr, err)
			ok = ok && addr == s.Replica.Addr
		}
		return seen, ok
	})
}

// masterAddr asks the sentinel sn for the master's address.
func masterAddr(ctx context.Context, sn *Server) (string, error) {
	out, err := cli(ctx, sn, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", MasterName)
	if err != nil {
		return "", err
	}
	f := strings.Fields(out)
	if len(f) != 2 {
		return "", fmt.Errorf("redistest: GET-MASTER-ADDR-BY-NAME answered %q", out)
	}
	return net.JoinHostPort(f[0], f[1]), nil
}

// infoInt is the integer field name of an INFO reply, or -1.
func infoInt(info, name string) int64 {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}

// cli runs redis-cli against s and returns its output.
func cli(ctx context.Context, s *Server, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "redis-cli", append([]string{"-p", strconv.Itoa(s.Port)}, args...)...).Output()
	return string(out), err
}

// wait polls cond every 50ms until it holds, failing t with what cond last
// saw once ctx is done.
func wait(ctx context.Context, t testing.TB, what string, cond func() (seen string, ok bool)) {
	t.Helper()
	for {
		seen, ok := cond()
		if ok {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("redistest: %s: never happened; last saw:\n%s", what, seen)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
