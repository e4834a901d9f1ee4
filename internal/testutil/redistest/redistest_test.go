package redistest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStartSentinel: the sentinels name the master, the replica copies it,
// and when the master dies the sentinels promote the replica.
func TestStartSentinel(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d sentinels", n), func(t *testing.T) {
			s := StartSentinel(t, n)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if addr, err := s.MasterAddr(ctx); err != nil || addr != s.Master.Addr {
				t.Fatalf("sentinels name %q (%v), want the master %s", addr, err, s.Master.Addr)
			}
			if out, err := cli(ctx, s.Master, "SET", "k", "v"); err != nil || out != "OK\n" {
				t.Fatalf("SET on the master: %q, %v", out, err)
			}
			if out, err := cli(ctx, s.Master, "WAIT", "1", "5000"); err != nil || out != "1\n" {
				t.Fatalf("WAIT for the replica: %q, %v", out, err)
			}
			if out, err := cli(ctx, s.Replica, "GET", "k"); err != nil || out != "v\n" {
				t.Fatalf("GET on the replica: %q, %v", out, err)
			}
			s.Master.Stop()
			s.WaitPromoted(t, 15*time.Second)
			if out, err := cli(ctx, s.Replica, "GET", "k"); err != nil || out != "v\n" {
				t.Fatalf("GET on the promoted replica: %q, %v", out, err)
			}
		})
	}
}
