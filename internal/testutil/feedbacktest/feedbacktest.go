// Package feedbacktest holds every throttle.FeedbackStore to one contract:
// throttle's MemoryFeedbackStore (in a testing/synctest bubble) and
// redisrepo's FeedbackStore (against a real redis-server) run the same
// steps.
package feedbacktest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/feedbackstore"
)

// Blind is how long a claim refused for the claims on the wire waits
// (both stores use 20 ms).
const Blind = 20 * time.Millisecond

// Contract runs the contract's steps against s, whose keys must be unused.
// It sleeps with time.Sleep (fake time in a synctest bubble) about 4 s in
// all. A store whose clock is not the test's (Redis TIME) may be off by
// tolerance.
func Contract(t *testing.T, s throttle.FeedbackStore, tolerance time.Duration) {
	ctx := context.Background()
	var mu sync.Mutex
	var got []feedbackstore.Notice
	stop := s.Subscribe(func(n feedbackstore.Notice) {
		mu.Lock()
		got = append(got, n)
		mu.Unlock()
	})
	notices := func(want int) []feedbackstore.Notice {
		for range 200 { // a store may deliver asynchronously
			mu.Lock()
			n := len(got)
			mu.Unlock()
			if n >= want {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		return append([]feedbackstore.Notice(nil), got...)
	}

	probe := func(key, id string) bool {
		held, err := s.Probe(ctx, key, id, time.Second)
		require.NoError(t, err)
		return held.IsZero()
	}
	assert.True(t, probe("k", "a"))
	assert.False(t, probe("k", "b"), "a holds the lease")
	assert.True(t, probe("k", "a"), "a holds the lease")
	assert.True(t, probe("other", "b"), "leases are per key")
	until := time.Now().Add(time.Second)
	require.NoError(t, s.Pause(ctx, "k", "a", until))
	held, err := s.Probe(ctx, "k", "b", time.Second)
	require.NoError(t, err)
	assert.WithinDuration(t, until, held, tolerance, "nobody probes before the pause ends")
	time.Sleep(time.Until(until) + tolerance)
	assert.True(t, probe("k", "b"), "the pause ended")
	assert.False(t, probe("k", "a"), "b holds the lease")
	require.NoError(t, s.Resume(ctx, "k", "b"))
	assert.True(t, probe("k", "a"), "b's Resume ended its lease")
	n := notices(2)
	if assert.Len(t, n, 2) {
		assert.Equal(t, "k", n[0].Key)
		assert.WithinDuration(t, until, n[0].Until, time.Millisecond, "the pause's end, to the millisecond")
		assert.Equal(t, feedbackstore.Notice{Key: "k"}, n[1], "the resumption")
	}

	claim := func() feedbackstore.Grant {
		g, err := s.Claim(ctx, "q")
		require.NoError(t, err)
		return g
	}
	settle := func(seq, rem int64, reset time.Time) {
		q := feedbackstore.SharedQuota{Known: true, Remaining: rem, Reset: reset}
		require.NoError(t, s.Settle(ctx, "q", feedbackstore.Grant{Seq: seq}, q))
	}
	soon := func(msg string) {
		now := time.Now()
		g := claim()
		assert.Zero(t, g.Seq, msg)
		assert.False(t, g.Spent, msg)
		assert.WithinDuration(t, now.Add(Blind), g.Retry, tolerance, msg)
	}
	assert.Equal(t, int64(1), claim().Seq, "nothing known: admitted")
	assert.Equal(t, int64(2), claim().Seq, "nothing known: admitted")
	reset := time.Now().Add(time.Second).Truncate(time.Millisecond)
	settle(0, 5, reset)
	soon("known from an unclaimed answer only, and claims on the wire")
	settle(1, 4, reset)
	assert.Equal(t, int64(3), claim().Seq, "4 remain, 1 on the wire")
	assert.Equal(t, int64(4), claim().Seq, "4 remain, 2 on the wire")
	assert.Equal(t, int64(5), claim().Seq, "4 remain, 3 on the wire")
	soon("4 remain, 4 on the wire: wait for answers")
	settle(4, 3, reset)
	settle(2, 6, reset)
	assert.Equal(t, int64(6), claim().Seq, "3 remain (the answer saying 6 is older), 2 on the wire")
	settle(0, 0, reset)
	g := claim()
	assert.True(t, g.Spent && g.Seq == 0, "nothing remains until the reset")
	assert.True(t, g.Retry.Equal(reset), "retry at the reset: %v", g.Retry)
	settle(3, 9, reset.Add(time.Second))
	assert.Equal(t, int64(7), claim().Seq, "a new window: 9 remain")
	time.Sleep(time.Until(reset.Add(time.Second)) + tolerance)
	settle(6, 0, reset.Add(time.Second))
	assert.Equal(t, int64(8), claim().Seq, "the window's reset passed")

	stop()
	require.NoError(t, s.Resume(ctx, "k", "a"))
	time.Sleep(10 * time.Millisecond)
	assert.Len(t, notices(0), 2, "no notice after stop")
}
