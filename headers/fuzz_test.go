package headers

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// fuzzKeys are the names Parse knows, spelt in assorted ways.
var fuzzKeys = []string{
	"Retry-After", "retry-after-ms", "X-Ms-Retry-After-Ms", "X-Retry-In",
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
	"X-RateLimit-Requests-Limit", "X-RateLimit-Requests-Remaining", "X-RateLimit-Requests-Reset",
	"X-RateLimit-Complexity-Limit", "X-RateLimit-Complexity-Remaining", "X-RateLimit-Complexity-Reset",
	"X-RateLimit-Endpoint-Requests-Remaining",
	"X-HubSpot-RateLimit-Max", "X-HubSpot-RateLimit-Remaining", "X-HubSpot-RateLimit-Interval-Milliseconds",
	"X-HubSpot-RateLimit-Daily", "X-HubSpot-RateLimit-Daily-Remaining",
	"X-HubSpot-RateLimit-Secondly", "X-HubSpot-RateLimit-Secondly-Remaining",
	"Sforce-Limit-Info",
	"X-AI-RateLimit-Limit-openai-instance", "X-AI-RateLimit-Remaining-openai-instance",
	"X-AI-RateLimit-Reset-openai-instance",
	"Age",
}

// fuzzValues are values of every form Parse reads, and some it refuses.
var fuzzValues = []string{
	"0", "30", "1.5", "598.0", "1704207630", "1704207630.123", "1704207630250",
	"Tue, 02 Jan 2024 15:00:30 GMT", "Tue, 02 Jan 2024 15:00:30 UTC",
	"Tuesday, 02-Jan-24 15:00:30 GMT", "Tue Jan  2 15:00:30 2024",
	"2024-01-02T15:04Z", "2024-01-02T15:00:30.5Z", "6m0s", "1h2m3.5s", "20ms",
	`"burst";q=100;w=60, "daily";q=1000;w=86400`, `"burst";r=50;t=30`,
	"limit=100, remaining=50, reset=30", "100, 100;w=60", "32/40",
	"Microsoft.Compute/HighCostGet3Min;159", "-1", "1e9", "NaN", "",
	"99999999999999999999", "0.0000000001", ", ,", "Mon,", "Mon, ,",
	// The dialects of TestParseDialects.
	"100;w=21600", "76;w=21600", "0;w=21600", "1704207690000", "10000", "500000",
	"api-usage=18/5000", "api-usage=25/5000; per-app-api-usage=17/250(appName=sample-connected-app)",
	"api-usage=110018/100000; api-bursts=1/750", "per-app-api-usage=1/2(appName=", "api-usage=(",
	`"peruser";q=65535;qu="content-bytes";w=10;pk=:c2RmakxKVU9VSA==:`, `"peruser";r=300;t=3`,
	`"default";r=999;pk=:dHJpYWwxMjEzMjM=:`, `"inflight";q=10;qu="concurrent-requests"`,
	`"p";q=10;w=60;pk=:YQ==:, "p";q=20;w=60;pk=:Yg==:`, `"p";r=0;t=5;pk=:Yg==:`, `"p";q=1;qu=tok`,
}

func FuzzParse(f *testing.F) {
	for _, s := range fuzzValues {
		f.Add(s, "")
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		check := func(h http.Header) {
			info := Parse(h, now)
			// ParseInto, the Transport's parser, reads the same, whatever
			// room its buffer has.
			var buf [2]Quota
			in, _ := ParseInto(buf[:0], h, now)
			if !slices.Equal(in.Quotas, info.Quotas) || in.RetryAfter != info.RetryAfter || in.HasRetryAfter != info.HasRetryAfter {
				t.Fatalf("ParseInto read %+v, Parse %+v, for %q", in, info, h)
			}
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

func FuzzPeekBody(f *testing.F) {
	for _, s := range []string{
		"", "{}", `{"error":{"type":"insufficient_quota"}}`,
		`{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","violated-policies":["daily"]}`,
		strings.Repeat("x", PeekLimit+1),
	} {
		f.Add([]byte(s), uint16(1), uint8(3), false, false)
		f.Add([]byte(s), uint16(4096), uint8(1), true, true)
	}
	statuses := []int{200, 403, 413, 429, 503, 529, 500}
	boom := errors.New("boom")
	f.Fuzz(func(t *testing.T, data []byte, chunk uint16, st uint8, fail, known bool) {
		orig := &body{data: bytes.Clone(data), chunk: int(chunk)%8192 + 1}
		if fail {
			orig.err = boom
		}
		status := statuses[int(st)%len(statuses)]
		resp := response(status, "application/json", orig)
		if known && !fail {
			resp.ContentLength = int64(len(data))
		}
		prefix := PeekBody(resp)
		if len(prefix) > PeekLimit || !bytes.HasPrefix(data, prefix) {
			t.Fatalf("peeked %q of %q", prefix, data)
		}
		if !peekable(status, resp.Header) || (known && !fail && len(data) == 0) {
			if prefix != nil || resp.Body != io.ReadCloser(orig) {
				t.Fatalf("status %d: the body was touched", status)
			}
		}
		c := Classify(status, resp.Header, prefix)
		if c.Limit < -1 || c.Requested < -1 {
			t.Fatalf("bad numbers %+v", c)
		}
		all, err := io.ReadAll(resp.Body)
		if !bytes.Equal(all, data) {
			t.Fatalf("read %q, want %q", all, data)
		}
		if fail && !errors.Is(err, boom) || !fail && err != nil {
			t.Fatalf("read error %v (fail %v)", err, fail)
		}
		_ = resp.Body.Close()
		if prefix != nil {
			_ = resp.Body.Close() // the peeked body closes the original once
		}
		if orig.closes != 1 {
			t.Fatalf("original closed %d times", orig.closes)
		}
	})
}

func FuzzClassify(f *testing.F) {
	for _, s := range []string{
		"", "{}", `{"message":"You have exceeded a secondary rate limit."}`,
		`{"error":{"message":"Request too large for x: Limit 30000, Requested 45411.","code":"rate_limit_exceeded"}}`,
		`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
		`{"error":{"type":"rate_limit_error","details":{"error_code":"enforced_spend_limit_reached"}}}`,
		`{"type":"https://iana.org/assignments/http-problem-types#abnormal-usage-detected","violated-policies":[1]}`,
		`{"type": "https://iana.org/assignments/http-problem-types#quota-exceeded`, `{"error":"plain"}`,
		`{"error":{"code":42}}`, "Limit 1,2,3, Requested ,",
	} {
		f.Add(429, s, "", "")
		f.Add(403, s, "30", "true")
	}
	f.Fuzz(func(t *testing.T, status int, body, retryAfter, should string) {
		h := http.Header{"Retry-After": {retryAfter}, "X-Should-Retry": {should}, "X-Ratelimit-Remaining": {retryAfter}}
		c := Classify(status, h, []byte(body))
		if c.Limit < -1 || c.Requested < -1 || c.MinWait < 0 || c.Signal > TooLarge {
			t.Fatalf("bad classification %+v", c)
		}
		if c.Signal != TooLarge && (c.Limit != -1 || c.Requested != -1) {
			t.Fatalf("numbers without TooLarge: %+v", c)
		}
	})
}
