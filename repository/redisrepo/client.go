package redisrepo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"
)

// deadlineClient returns a client of the same Redis as c whose socket reads and
// writes end at the context's deadline, and whether it made one of its own
// (to close with the repository). go-redis bounds a read by the context's
// deadline only with ContextTimeoutEnabled; without it a read waits for
// ReadTimeout (3s by default) whatever the context says, and a round trip
// cannot be cut short by anything but closing its connection. A client that
// already honours contexts is used as it is; for one that does not (the
// default) we make a client of our own from its options, with
// ContextTimeoutEnabled set: the same addresses, credentials, TLS, dialer
// (a failover client's follows its sentinels) and pool settings, and a
// pool of its own. Hooks added to c do not see its commands. ok is false
// for a client of another kind: its round trips are then bounded by the
// caller's wait only (see batcher.do).
func deadlineClient(c redis.UniversalClient) (rc redis.UniversalClient, w *dialWatch, own, ok bool) {
	switch c := c.(type) {
	case *redis.Client:
		o := c.Options()
		if o.ContextTimeoutEnabled {
			return c, nil, false, true
		}
		cp := *o
		cp.ContextTimeoutEnabled = true
		// The client wrote its push processor (RESP3 notifications) into
		// its options: ours makes its own, and a config of its own.
		cp.PushNotificationProcessor = nil
		if o.MaintNotificationsConfig != nil {
			mc := *o.MaintNotificationsConfig
			cp.MaintNotificationsConfig = &mc
		}
		nc := redis.NewClient(&cp)
		w = &dialWatch{}
		nc.AddHook(w)
		return nc, w, true, true
	case *redis.ClusterClient:
		o := c.Options()
		if o.ContextTimeoutEnabled {
			return c, nil, false, true
		}
		cp := *o
		cp.ContextTimeoutEnabled = true
		cp.PushNotificationProcessor = nil
		if o.MaintNotificationsConfig != nil {
			mc := *o.MaintNotificationsConfig
			cp.MaintNotificationsConfig = &mc
		}
		return redis.NewClusterClient(&cp), nil, true, true
	}
	return c, nil, false, false
}

// dialWatch remembers the last failed dial of a client of ours: go-redis
// retries a refused connection until the deadline and then reports the
// deadline, not the refusal.
type dialWatch struct{ last atomic.Pointer[dialFailure] }

type dialFailure struct {
	err error
	at  time.Time
}

func (w *dialWatch) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			w.last.Store(&dialFailure{err, time.Now()})
		} else {
			w.last.Store(nil)
		}
		return c, err
	}
}

func (w *dialWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (w *dialWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// cause is err, a round trip begun at begin that failed, or, when err is
// its deadline and a dial failed since begin, the dial's failure.
func (w *dialWatch) cause(err error, begin time.Time) error {
	if w == nil || !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if f := w.last.Load(); f != nil && !f.at.Before(begin) {
		return f.err
	}
	return err
}

// unavailableError is a failure to reach Redis, or an error Redis answered
// that says it cannot decide (a script error, an authentication failure):
// it wraps ErrUnavailable and the cause, and says which it was.
type unavailableError struct {
	what string
	err  error
}

func (e *unavailableError) Error() string {
	if e.err == nil {
		return ErrUnavailable.Error() + ": " + e.what
	}
	return ErrUnavailable.Error() + ": " + e.what + ": " + e.err.Error()
}

func (e *unavailableError) Unwrap() []error {
	if e.err == nil {
		return []error{ErrUnavailable}
	}
	return []error{ErrUnavailable, e.err}
}

// errNoReply is what a caller that stopped waiting for the sender reports.
var errNoReply = errors.New("no reply")

// unavailable wraps err (a failed round trip of d at most) as
// ErrUnavailable, saying what happened: a timeout, a refused or reset
// connection, an authentication failure, a script error, an open breaker.
// nil stays nil; an error that already wraps ErrUnavailable is kept.
func unavailable(err error, d time.Duration) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	return &unavailableError{what: describe(err, d), err: err}
}

// describe names what err says happened to a round trip of d at most.
func describe(err error, d time.Duration) string {
	var nerr net.Error
	var rerr redis.Error
	switch {
	case errors.Is(err, gobreaker.ErrOpenState):
		return "circuit breaker open"
	case errors.Is(err, gobreaker.ErrTooManyRequests):
		return "circuit breaker half-open, its trial in flight"
	case errors.Is(err, errNoReply), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &nerr) && nerr.Timeout():
		if d > 0 {
			return fmt.Sprintf("timeout: no reply within %v", d)
		}
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return "connection reset"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "host unreachable"
	case errors.As(err, &rerr):
		msg := rerr.Error()
		switch {
		case hasAnyPrefix(msg, "NOAUTH", "WRONGPASS", "NOPERM", "ERR AUTH", "ERR invalid password", "ERR Client sent AUTH"):
			return "authentication failed"
		case hasAnyPrefix(msg, "NOSCRIPT", "BUSY", "ERR Error running script", "ERR user_script", "ERR Error compiling script", "ERR Lua", "ERR script"),
			strings.Contains(msg, "script"):
			return "script error"
		case hasAnyPrefix(msg, "LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "MOVED", "ASK"):
			return "server not ready"
		case hasAnyPrefix(msg, "OOM"):
			return "server out of memory"
		}
		return "server error"
	}
	var operr *net.OpError
	if errors.As(err, &operr) && operr.Op == "dial" {
		return "cannot connect"
	}
	return "error"
}

func hasAnyPrefix(s string, ps ...string) bool {
	for _, p := range ps {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// String names the kind as the constants do.
func (k EventKind) String() string {
	switch k {
	case EventBreaker:
		return "EventBreaker"
	case EventFailOpen:
		return "EventFailOpen"
	case EventFailLocal:
		return "EventFailLocal"
	case EventFailClosed:
		return "EventFailClosed"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}
