package throttle_test

import (
	"testing"
	"testing/synctest"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/testutil/feedbacktest"
)

// TestMemoryFeedbackStore holds the in-memory store to the contract every
// store keeps (internal/testutil/feedbacktest): one probe lease at a time, held
// through a pause, given up by its holder's Resume or by time; claims
// bounded by the least the server said remains less the claims on the
// wire, refused for 20 ms while only claims on the wire hold them; a new
// window replaces the old; notices reach every subscriber until it stops.
func TestMemoryFeedbackStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		feedbacktest.Contract(t, throttle.NewMemoryFeedbackStore(), 0)
	})
}
