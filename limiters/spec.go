package limiters

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/throttlekit/throttle/internal/clip"
)

// The algorithm names a Spec accepts.
const (
	AlgTokenBucket   = "token_bucket"
	AlgGCRA          = "gcra"
	AlgLeakyBucket   = "leaky_bucket"
	AlgFixedWindow   = "fixed_window"
	AlgSlidingWindow = "sliding_window"
	AlgSlidingLog    = "sliding_log"
	AlgConcurrency   = "concurrency"
)

// Spec describes a limiter as data: the one such description in the
// project, the form policy files and stores use. In JSON and YAML, Rate is
// written "10/s" and Window "1m". Validate accepts exactly the specs New can
// build: any positive rate, limit and window (the bucket algorithms saturate
// a refill longer than 2^60 ns, about 36 years).
type Spec struct {
	Algorithm  string        `json:"algorithm" yaml:"algorithm"`     // token_bucket, gcra, leaky_bucket, fixed_window, sliding_window, sliding_log, concurrency
	Limit      int           `json:"limit" yaml:"limit"`             // burst, capacity, window limit or max in flight
	Rate       Rate          `json:"rate" yaml:"rate"`               // bucket algorithms; text form "10/s"
	Window     time.Duration `json:"window" yaml:"window"`           // window algorithms; text form "1m"
	QueueLimit int           `json:"queue_limit" yaml:"queue_limit"` // permits that may wait; 0 means the algorithm's default
}

// Validate reports the first thing wrong with s, naming the field.
func (s Spec) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("limiters: spec %s: %s", field, fmt.Sprintf(format, args...))
	}
	switch s.Algorithm {
	case AlgTokenBucket, AlgGCRA, AlgLeakyBucket:
		if !s.Rate.valid() {
			return bad("rate", "%s needs a positive rate such as \"10/s\", got %q", s.Algorithm, s.Rate.String())
		}
	case AlgFixedWindow, AlgSlidingWindow, AlgSlidingLog:
		if s.Window <= 0 {
			return bad("window", "%s needs a positive window such as \"1m\", got %v", s.Algorithm, s.Window)
		}
	case AlgConcurrency:
	case "":
		return bad("algorithm", "missing; want one of token_bucket, gcra, leaky_bucket, fixed_window, sliding_window, sliding_log, concurrency")
	default:
		return bad("algorithm", "unknown algorithm %s; want one of token_bucket, gcra, leaky_bucket, fixed_window, sliding_window, sliding_log, concurrency", clip.Quote(s.Algorithm))
	}
	if s.Limit <= 0 {
		return bad("limit", "must be positive, got %d", s.Limit)
	}
	if s.QueueLimit < 0 {
		return bad("queue_limit", "must not be negative, got %d", s.QueueLimit)
	}
	return nil
}

// New builds the limiter s describes, or returns Validate's error.
func (s Spec) New() (Limiter, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	var opts []Option
	if s.QueueLimit > 0 {
		opts = append(opts, WithQueueLimit(s.QueueLimit))
	}
	switch s.Algorithm {
	case AlgTokenBucket:
		return NewTokenBucket(s.Rate, s.Limit, opts...), nil
	case AlgGCRA:
		return NewGCRA(s.Rate, s.Limit, opts...), nil
	case AlgLeakyBucket:
		return NewLeakyBucket(s.Rate, s.Limit, opts...), nil
	case AlgFixedWindow:
		return NewFixedWindow(s.Limit, s.Window, opts...), nil
	case AlgSlidingWindow:
		return NewSlidingWindow(s.Limit, s.Window, opts...), nil
	case AlgSlidingLog:
		return NewSlidingLog(s.Limit, s.Window, opts...), nil
	default:
		return NewConcurrency(s.Limit, opts...), nil
	}
}

// specJSON is Spec's wire form: Window as a duration string.
type specJSON struct {
	Algorithm  string `json:"algorithm"`
	Limit      int    `json:"limit"`
	Rate       *Rate  `json:"rate,omitempty"`
	Window     string `json:"window,omitempty"`
	QueueLimit int    `json:"queue_limit,omitempty"`
}

// MarshalJSON writes Rate as "10/s" and Window as "1m0s".
func (s Spec) MarshalJSON() ([]byte, error) {
	j := specJSON{Algorithm: s.Algorithm, Limit: s.Limit, QueueLimit: s.QueueLimit}
	if s.Rate != (Rate{}) {
		r := s.Rate
		j.Rate = &r
	}
	if s.Window != 0 {
		j.Window = s.Window.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads Rate as "10/s" and Window as a duration string ("1m").
// Unknown fields are an error. It does not validate; call Validate.
func (s *Spec) UnmarshalJSON(b []byte) error {
	var j struct {
		Algorithm  string          `json:"algorithm"`
		Limit      int             `json:"limit"`
		Rate       *Rate           `json:"rate"`
		Window     json.RawMessage `json:"window"`
		QueueLimit int             `json:"queue_limit"`
	}
	// Config comes from users: a misspelt field is an error, not a default.
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		// The decoder's message may quote the input (an unknown field's
		// name, a bad rate): clip it.
		return errors.New("limiters: spec: " + clip.String(err.Error()))
	}
	out := Spec{Algorithm: j.Algorithm, Limit: j.Limit, QueueLimit: j.QueueLimit}
	if j.Rate != nil {
		out.Rate = *j.Rate
	}
	if len(j.Window) > 0 && string(j.Window) != "null" {
		var w string
		if err := json.Unmarshal(j.Window, &w); err != nil {
			return fmt.Errorf("limiters: spec window: want a duration string such as \"1m\", got %s", clip.String(string(j.Window)))
		}
		d, err := time.ParseDuration(w)
		if err != nil {
			return fmt.Errorf("limiters: spec window: invalid duration %s", clip.Quote(w))
		}
		out.Window = d
	}
	*s = out
	return nil
}
