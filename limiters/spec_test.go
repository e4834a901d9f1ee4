package limiters_test

import (
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/limiters"
)

func TestSpecValidateNamesTheField(t *testing.T) {
	tests := []struct {
		name  string
		spec  limiters.Spec
		field string
	}{
		{"missing algorithm", limiters.Spec{Limit: 1}, "algorithm"},
		{"unknown algorithm", limiters.Spec{Algorithm: "magic", Limit: 1}, "algorithm"},
		{"bucket without rate", limiters.Spec{Algorithm: "token_bucket", Limit: 1}, "rate"},
		{"gcra with zero period", limiters.Spec{Algorithm: "gcra", Limit: 1, Rate: limiters.Rate{N: 1}}, "rate"},
		{"leaky without rate", limiters.Spec{Algorithm: "leaky_bucket", Limit: 1}, "rate"},
		{"window without window", limiters.Spec{Algorithm: "fixed_window", Limit: 1}, "window"},
		{"sliding with negative window", limiters.Spec{Algorithm: "sliding_window", Limit: 1, Window: -time.Second}, "window"},
		{"log without window", limiters.Spec{Algorithm: "sliding_log", Limit: 1}, "window"},
		{"zero limit", limiters.Spec{Algorithm: "concurrency"}, "limit"},
		{"negative limit", limiters.Spec{Algorithm: "token_bucket", Rate: limiters.PerSecond(1), Limit: -1}, "limit"},
		{"negative queue limit", limiters.Spec{Algorithm: "concurrency", Limit: 1, QueueLimit: -1}, "queue_limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.spec.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), "limiters: spec "+tt.field+":")
			l, err2 := tt.spec.New()
			assert.Nil(t, l)
			assert.Equal(t, err, err2, "New returns Validate's error")
		})
	}
}

func TestSpecNew(t *testing.T) {
	tests := []struct {
		spec      limiters.Spec
		wantType  limiters.Limiter
		wantLimit int
	}{
		{limiters.Spec{Algorithm: limiters.AlgTokenBucket, Limit: 5, Rate: limiters.PerSecond(1)}, &limiters.TokenBucket{}, 5},
		{limiters.Spec{Algorithm: limiters.AlgGCRA, Limit: 6, Rate: limiters.PerSecond(1)}, &limiters.GCRA{}, 6},
		{limiters.Spec{Algorithm: limiters.AlgLeakyBucket, Limit: 7, Rate: limiters.PerSecond(1)}, &limiters.LeakyBucket{}, 7},
		{limiters.Spec{Algorithm: limiters.AlgFixedWindow, Limit: 8, Window: time.Minute}, &limiters.FixedWindow{}, 8},
		{limiters.Spec{Algorithm: limiters.AlgSlidingWindow, Limit: 9, Window: time.Minute}, &limiters.SlidingWindow{}, 9},
		{limiters.Spec{Algorithm: limiters.AlgSlidingLog, Limit: 10, Window: time.Minute}, &limiters.SlidingLog{}, 10},
		{limiters.Spec{Algorithm: limiters.AlgConcurrency, Limit: 11}, &limiters.Concurrency{}, 11},
	}
	for _, tt := range tests {
		t.Run(tt.spec.Algorithm, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				require.NoError(t, tt.spec.Validate())
				l, err := tt.spec.New()
				require.NoError(t, err)
				defer l.Close()
				assert.IsType(t, tt.wantType, l)
				d := l.TryAcquire(0)
				assert.Equal(t, tt.wantLimit, d.Limit)
				assert.True(t, d.Allowed)
			})
		})
	}
}

func TestSpecQueueLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := limiters.Spec{Algorithm: "concurrency", Limit: 1, QueueLimit: 1}.New()
		require.NoError(t, err)
		defer l.Close()
		require.True(t, l.TryAcquire(1).Allowed)
		a := newAcquirer()
		w := a.goAcquire(t.Context(), l, 0, 1)
		require.ErrorIs(t, l.Acquire(t.Context(), 1), limiters.ErrQueueFull)
		l.Release(1)
		require.NoError(t, recv(t, w).err)
	})
}

func TestSpecJSON(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want limiters.Spec
	}{
		{"bucket", `{"algorithm":"token_bucket","limit":20,"rate":"10/s","queue_limit":5}`,
			limiters.Spec{Algorithm: "token_bucket", Limit: 20, Rate: limiters.PerSecond(10), QueueLimit: 5}},
		{"window", `{"algorithm":"sliding_window","limit":100,"window":"1m"}`,
			limiters.Spec{Algorithm: "sliding_window", Limit: 100, Window: time.Minute}},
		{"odd rate", `{"algorithm":"gcra","limit":3,"rate":"100/30s","window":null}`,
			limiters.Spec{Algorithm: "gcra", Limit: 3, Rate: limiters.Rate{N: 100, Per: 30 * time.Second}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s limiters.Spec
			require.NoError(t, json.Unmarshal([]byte(tt.in), &s))
			assert.Equal(t, tt.want, s)
			require.NoError(t, s.Validate())

			b, err := json.Marshal(s)
			require.NoError(t, err)
			var back limiters.Spec
			require.NoError(t, json.Unmarshal(b, &back))
			assert.Equal(t, s, back, "round trip through %s", b)
		})
	}

	b, err := json.Marshal(limiters.Spec{Algorithm: "token_bucket", Limit: 20, Rate: limiters.PerSecond(10)})
	require.NoError(t, err)
	assert.JSONEq(t, `{"algorithm":"token_bucket","limit":20,"rate":"10/s"}`, string(b))
	b, err = json.Marshal(limiters.Spec{Algorithm: "fixed_window", Limit: 20, Window: time.Minute})
	require.NoError(t, err)
	assert.JSONEq(t, `{"algorithm":"fixed_window","limit":20,"window":"1m0s"}`, string(b))
}

func TestSpecJSONErrors(t *testing.T) {
	for _, in := range []string{
		`{"algorithm":"fixed_window","limit":1,"window":60}`,
		`{"algorithm":"fixed_window","limit":1,"window":"soon"}`,
		`{"algorithm":"gcra","limit":1,"rate":"fast"}`,
		`{"algorithm":"gcra","limit":"one"}`,
		`[]`,
	} {
		t.Run(in, func(t *testing.T) {
			var s limiters.Spec
			require.Error(t, json.Unmarshal([]byte(in), &s))
		})
	}
}
