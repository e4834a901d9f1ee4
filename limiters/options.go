package limiters

import "fmt"

// Option configures a limiter at construction. A nil Option panics.
type Option func(*config)

// config is what options set. Limiters built without options share one
// default config, so an option-less limiter pays nothing for it.
type config struct {
	name       string
	queueLimit int // permits that may wait; < 0 means unlimited
}

// WithName names the limiter; the name appears in *RejectedError.
func WithName(name string) Option { return func(c *config) { c.name = name } }

// WithQueueLimit bounds how many permits may wait in Acquire at once (the
// sum of the queued requests' n, as .NET's QueueLimit counts). A request that
// would not fit fails at once with ErrQueueFull. Zero means no request may
// wait; a negative limit means unlimited, the default for every limiter but
// LeakyBucket, whose default is its capacity.
func WithQueueLimit(permits int) Option { return func(c *config) { c.queueLimit = permits } }

var defaultConfig = &config{queueLimit: -1}

func newConfig(queueLimit int, opts []Option) *config {
	if len(opts) == 0 && queueLimit < 0 {
		return defaultConfig
	}
	c := &config{queueLimit: queueLimit}
	for i, o := range opts {
		if o == nil {
			panic(fmt.Sprintf("limiters: option %d of %d is nil", i+1, len(opts)))
		}
		o(c)
	}
	return c
}
