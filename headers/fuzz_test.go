package headers

import (
	"net/http"
	"testing"
)

// fuzzKeys are the names Parse knows, spelt in assorted ways.
var fuzzKeys = []string{
	"Retry-After", "retry-after-ms", "X-Ms-Retry-After-Ms",
	"RateLimit", "RateLimit-Policy",
	"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "RateLimit-ResetTime",
	"RateLimit-Observed", "RateLimit-Name",
	"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "X-RateLimit-Reset-After",
	"X-RateLimit-Used", "X-RateLimit-Resource", "X-RateLimit-Bucket", "X-RateLimit-Scope",
	"X-RateLimit-Interval-Seconds", "X-RateLimit-FillRate",
	"x-rate-limit-limit", "x-rate-limit-remaining", "x-rate-limit-reset",
	"x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests",
	"x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens",
	"anthropic-ratelimit-requests-limit", "anthropic-ratelimit-requests-remaining",
	"anthropic-ratelimit-requests-reset", "anthropic-ratelimit-input-tokens-reset",
	"x-ms-ratelimit-remaining-subscription-reads", "x-ms-ratelimit-remaining-resource",
	"X-Shopify-Shop-Api-Call-Limit",
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"0", "30", "1.5", "598.0", "1704207630", "1704207630.123", "1704207630250",
		"Tue, 02 Jan 2024 15:00:30 GMT", "Tue, 02 Jan 2024 15:00:30 UTC",
		"Tuesday, 02-Jan-24 15:00:30 GMT", "Tue Jan  2 15:00:30 2024",
		"2024-01-02T15:04Z", "2024-01-02T15:00:30.5Z", "6m0s", "1h2m3.5s", "20ms",
		`"burst";q=100;w=60, "daily";q=1000;w=86400`, `"burst";r=50;t=30`,
		"limit=100, remaining=50, reset=30", "100, 100;w=60", "32/40",
		"Microsoft.Compute/HighCostGet3Min;159", "-1", "1e9", "NaN", "",
		"99999999999999999999", "0.0000000001", ", ,", "Mon,", "Mon, ,",
	} {
		f.Add(s, "")
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		check := func(h http.Header) {
			info := Parse(h, now)
			d := info.Delay(now)
			if d < 0 || d > maxAhead {
				t.Fatalf("Delay %v out of range for %q", d, h)
			}
			if info.HasRetryAfter && (info.RetryAfter < 0 || info.RetryAfter > maxAhead) {
				t.Fatalf("RetryAfter %v out of range for %q", info.RetryAfter, h)
			}
			if !info.HasRetryAfter && info.RetryAfter != 0 {
				t.Fatalf("RetryAfter %v without HasRetryAfter for %q", info.RetryAfter, h)
			}
			for _, q := range info.Quotas {
				if q.Limit < -1 || q.Remaining < -1 {
					t.Fatalf("bad counts %+v for %q", q, h)
				}
				if !q.Reset.IsZero() && q.Reset.Sub(now) > maxAhead {
					t.Fatalf("reset too far %+v for %q", q, h)
				}
				if q.Window < 0 || q.Window > maxAhead {
					t.Fatalf("bad window %+v for %q", q, h)
				}
			}
		}
		all := http.Header{}
		for _, k := range fuzzKeys {
			check(http.Header{k: {a}})
			check(http.Header{k: {a, b}})
			all[k] = []string{a, b}
		}
		check(all)
		check(http.Header{a: {b}}) // arbitrary names too
	})
}

func TestFuzzKeysAreKnown(t *testing.T) {
	for _, k := range fuzzKeys {
		if kd, _, _ := classify(k); kd == kindNone {
			t.Errorf("%s is not classified", k)
		}
	}
}
