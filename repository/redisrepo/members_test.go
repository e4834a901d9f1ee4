package redisrepo

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/internal/testutil/redistest"
	"github.com/throttlekit/throttle/limiters"
)

// TestMembers: each limit of a chain in Redis reports its own state, as
// limiters.Members does in memory, on the same driven clock.
func TestMembers(t *testing.T) {
	s := redistest.Start(t)
	c := newClient(t, s)
	specs := []limiters.Spec{
		{Algorithm: limiters.AlgSlidingLog, Limit: 10, Window: time.Minute},
		{Algorithm: limiters.AlgFixedWindow, Limit: 1000, Window: 24 * time.Hour},
		{Algorithm: limiters.AlgGCRA, Rate: limiters.PerSecond(10), Limit: 5},
		{Algorithm: limiters.AlgLeakyBucket, Rate: limiters.PerSecond(10), Limit: 5},
	}
	r, err := NewChain(c, specs)
	require.NoError(t, err)
	defer r.Close()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	r.SetClock(func() int64 { return now })
	ctx := context.Background()
	d, err := r.TryAcquire(ctx, "alice", 1)
	require.NoError(t, err)
	require.True(t, d.Allowed)

	ms, err := r.Members(ctx, "alice", 1, nil)
	require.NoError(t, err)
	require.Len(t, ms, 4)
	assert.Equal(t, limiters.Member{Algorithm: limiters.AlgSlidingLog, Limit: 10, Remaining: 9, ResetAfter: time.Minute, Next: time.Minute}, ms[0])
	assert.Equal(t, limiters.Member{Algorithm: limiters.AlgFixedWindow, Limit: 1000, Remaining: 999, ResetAfter: 24 * time.Hour, Next: 24 * time.Hour}, ms[1])
	assert.Equal(t, limiters.Member{Algorithm: limiters.AlgGCRA, Limit: 5, Remaining: 4, ResetAfter: 100 * time.Millisecond, Next: 100 * time.Millisecond}, ms[2])
	lb := ms[3]
	assert.Equal(t, []any{limiters.AlgLeakyBucket, 5, 100 * time.Millisecond, 100 * time.Millisecond}, []any{lb.Algorithm, lb.Limit, lb.Wait, lb.Next},
		"the leaky bucket's next slot, and the wait for it")

	// A cost above a limit: waiting alone will not do.
	ms, err = r.Members(ctx, "alice", 6, ms[:0])
	require.NoError(t, err)
	assert.Equal(t, time.Duration(-1), ms[2].Wait)
	assert.Equal(t, time.Duration(0), ms[0].Wait)
}
