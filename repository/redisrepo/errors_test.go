package redisrepo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"

	"github.com/throttlekit/throttle/internal/testutil/redistest"
	"github.com/throttlekit/throttle/limiters"
)

// TestUnavailableSaysWhat: every failure is ErrUnavailable, keeps its cause
// for errors.Is, and says what happened.
func TestUnavailableSaysWhat(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	read := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	for _, c := range []struct {
		err  error
		want string
	}{
		{dial, "connection refused"},
		{read, "connection reset"},
		{io.EOF, "connection reset"},
		{context.DeadlineExceeded, "timeout: no reply within 1s"},
		{errNoReply, "timeout: no reply within 1s"},
		{&net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, "timeout"},
		{gobreaker.ErrOpenState, "circuit breaker open"},
		{redis.ErrClosed, "error"},
	} {
		got := unavailable(c.err, time.Second)
		if !errors.Is(got, ErrUnavailable) || !errors.Is(got, c.err) {
			t.Errorf("%v: %v does not wrap ErrUnavailable and its cause", c.err, got)
		}
		if !strings.Contains(got.Error(), "redisrepo: redis unavailable: "+c.want) {
			t.Errorf("%v: %q does not say %q", c.err, got, c.want)
		}
	}
	if unavailable(nil, time.Second) != nil {
		t.Error("nil became an error")
	}
	if e := unavailable(dial, 0); unavailable(e, 0) != e {
		t.Error("an ErrUnavailable was wrapped twice")
	}
}

// TestUnavailableFromRedis: what Redis itself answers — a wrong password, a
// broken script — is named.
func TestUnavailableFromRedis(t *testing.T) {
	s := redistest.Start(t)
	good := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer good.Close()
	if err := good.Do(context.Background(), "ACL", "SETUSER", "alice", "on", ">secret", "~*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Username: "alice", Password: "wrong", MaxRetries: -1})
	defer c.Close()
	r := newRepo(t, c, limiters.Spec{Algorithm: limiters.AlgGCRA, Limit: 10, Rate: limiters.PerSecond(10)})
	_, err := r.TryAcquire(context.Background(), "k", 1)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "authentication failed") {
		t.Errorf("a wrong password: %v", err)
	}
	bad := redis.NewScript(`return redis.call('NOSUCHCOMMAND')`)
	err = unavailable(bad.Run(context.Background(), good, []string{"x"}).Err(), time.Second)
	if !strings.Contains(err.Error(), "script error") {
		t.Errorf("a failing script: %v", err)
	}
}

func TestEventKindString(t *testing.T) {
	for k, want := range map[EventKind]string{EventBreaker: "EventBreaker", EventFailOpen: "EventFailOpen",
		EventFailLocal: "EventFailLocal", EventFailClosed: "EventFailClosed", 0: "EventKind(0)", 9: "EventKind(9)"} {
		if got := k.String(); got != want {
			t.Errorf("%d: %q, want %q", int(k), got, want)
		}
	}
	if got := fmt.Sprint(EventFailOpen); got != "EventFailOpen" {
		t.Errorf("fmt: %q", got)
	}
}
