// Package feedbackstore holds the values a throttle.FeedbackStore passes,
// for those who implement one. Users of the stores this module provides
// (throttle.NewMemoryFeedbackStore, redisrepo.NewFeedbackStore) never need
// it: they give the store to throttle.WithFeedbackStore.
//
// A store implements throttle.FeedbackStore's six methods; the contract
// its implementations are held to is the one the module's stores pass
// (throttle's TestMemoryFeedbackStore and redisrepo's tests run the same
// contract on each).
package feedbackstore

import "time"

// Notice is what a FeedbackStore tells its subscribers.
type Notice struct {
	Key   string
	Until time.Time // the end of the pause; zero: the pause is over
}

// Grant is what FeedbackStore.Claim answers.
type Grant struct {
	Seq   int64     // the claim's number, from 1; 0: refused
	Retry time.Time // when refused: when to claim again
	Spent bool      // when refused: nothing remains until Retry, the quota's reset
}

// SharedQuota is what an answer said of its partition's tightest window
// quota.
type SharedQuota struct {
	Known     bool
	Remaining int64
	Reset     time.Time
}
