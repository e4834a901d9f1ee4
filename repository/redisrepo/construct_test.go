package redisrepo

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNilIsRefusedAtConstruction: a nil client or option is refused at
// once — an error from the constructors that return one, a panic naming
// it from the others — not a crash at the first call. Nothing here
// reaches Redis.
func TestNilIsRefusedAtConstruction(t *testing.T) {
	_, err := New(nil, leaseSpec)
	require.EqualError(t, err, "redisrepo: nil client")
	assert.PanicsWithValue(t, "redisrepo: NewFeedbackStore: nil client", func() { NewFeedbackStore(nil) })
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer c.Close()
	assert.PanicsWithValue(t, "redisrepo: option 2 of 2 is nil", func() { New(c, leaseSpec, WithPrefix("x:"), nil) })
	assert.PanicsWithValue(t, "redisrepo: option 1 of 1 is nil", func() { NewFeedbackStore(c, nil) })
	assert.PanicsWithValue(t, "redisrepo: option 1 of 1 is nil", func() { Storage(c, nil) })
}
