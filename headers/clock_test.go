package headers

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestEpochResetsFromAClockBefore2001: under a clock that reads before
// 2001-09-09 (testing/synctest's fake clock reads 2000-01-01) epoch seconds
// are below 1e9 and epoch milliseconds below 1e12. Read by size alone they
// would be a 30-year delay (dropped) and a date in the year 31000; read
// near now, they are what they are.
func TestEpochResetsFromAClockBefore2001(t *testing.T) {
	now := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	reset := now.Add(42 * time.Second)
	for name, v := range map[string]string{
		"seconds":      strconv.FormatInt(reset.Unix(), 10),
		"milliseconds": strconv.FormatInt(reset.UnixMilli(), 10),
	} {
		h := http.Header{}
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Reset", v)
		info := Parse(h, now)
		if assert.Len(t, info.Quotas, 1, name) {
			assert.True(t, info.Quotas[0].Reset.Equal(reset), "%s: got %v", name, info.Quotas[0].Reset)
		}
		assert.Equal(t, 42*time.Second, info.Delay(now), name)
	}
	// A real delay in seconds is still a delay.
	h := http.Header{"X-Ratelimit-Reset": {"30"}, "X-Ratelimit-Remaining": {"0"}}
	assert.Equal(t, 30*time.Second, Parse(h, now).Delay(now))
}
