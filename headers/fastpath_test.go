package headers

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseAllocates: Parse allocates only the slice it returns; the
// Anthropic set used to cost 13 allocations (time.ParseDuration's error for
// every RFC 3339 reset).
func TestParseAllocates(t *testing.T) {
	for _, c := range fixtures() {
		want := 0.0
		if c.quotas > 0 {
			want = 1
		}
		assert.Equal(t, want, testing.AllocsPerRun(100, func() { Parse(c.h, now) }), c.name)
	}
	assert.Zero(t, testing.AllocsPerRun(100, func() { parseReset("2024-01-02T15:04:06Z", now) }))
}

// TestParseInto: the parser the Transport calls reads what Parse reads,
// appends to the buffer it is given, with room in it allocates nothing,
// and reads the bucket the fields name.
func TestParseInto(t *testing.T) {
	parse := ParseInto
	var buf [8]Quota
	for _, c := range fixtures() {
		info, _ := parse(buf[:0], c.h, now)
		assert.Equal(t, Parse(c.h, now), info, c.name)
		if len(info.Quotas) > 0 {
			assert.Same(t, &buf[0], &info.Quotas[0], "%s: the quotas are in the buffer given", c.name)
		}
		assert.Zero(t, testing.AllocsPerRun(100, func() { parse(buf[:0], c.h, now) }), c.name)
	}
	for _, c := range []struct {
		h    http.Header
		want string
	}{
		{http.Header{"X-Ratelimit-Resource": {"search"}, "X-Ratelimit-Remaining": {"3"}}, "search"},
		{http.Header{"x-ratelimit-resource": {" core "}}, "core"},
		{http.Header{"X-Ratelimit-Bucket": {"abcd1234"}, "X-Ratelimit-Scope": {"user"}}, "abcd1234"},
		{http.Header{"X-Ratelimit-Resource": {""}, "X-Ratelimit-Bucket": {"b"}}, "b"},
		{http.Header{"X-Ratelimit-Resource": {"graphql"}, "X-Ratelimit-Bucket": {"b"}}, "graphql"},
		{http.Header{"X-Ratelimit-Scope": {"user"}, "X-Ratelimit-Limit": {"5"}}, ""},
		{http.Header{"Content-Type": {"text/plain"}}, ""},
	} {
		_, got := parse(buf[:0], c.h, now)
		assert.Equal(t, c.want, got, "%v", c.h)
	}
}

// TestParseAnyCase: a header parses the same whatever the case of its
// names: canonical, lower, upper or mixed at random, over every name Parse
// knows with every value of the fuzz corpus, and over the fixtures.
func TestParseAnyCase(t *testing.T) {
	var hs []http.Header
	for _, c := range fixtures() {
		hs = append(hs, c.h)
	}
	for _, k := range fuzzKeys {
		for _, v := range fuzzValues {
			hs = append(hs, http.Header{k: {v}}, http.Header{k: {v, "1"}})
		}
	}
	// Pairs of names: a reset with each limit, and so on.
	for i, k := range fuzzKeys {
		for _, k2 := range fuzzKeys[i+1:] {
			if !sameField(k, k2) {
				hs = append(hs, http.Header{k: {"0"}, k2: {"30, 1704207630"}})
			}
		}
	}
	seed := uint64(1)
	mixed := func(s string) string {
		b := []byte(s)
		for i := range b {
			seed = seed*6364136223846793005 + 1442695040888963407 // a fixed LCG: failures reproduce
			if seed>>63 == 0 {
				b[i] = strings.ToUpper(s[i : i+1])[0]
			} else {
				b[i] = strings.ToLower(s[i : i+1])[0]
			}
		}
		return string(b)
	}
	recase := []func(string) string{http.CanonicalHeaderKey, strings.ToLower, strings.ToUpper, mixed, mixed}
	for _, h := range hs {
		want := Parse(h, now)
		for _, f := range recase {
			h2 := http.Header{}
			for k, vs := range h {
				h2[f(k)] = vs
			}
			if got := Parse(h2, now); !assert.Equal(t, want, got, "%q as %q", h, h2) {
				return
			}
		}
	}
}

// sameField reports whether a and b name one field (X-RateLimit-Limit and
// x-rate-limit-limit, say), whose lines Parse merges in key order.
func sameField(a, b string) bool {
	ka, fa, na := classify(a)
	kb, fb, nb := classify(b)
	return ka == kb && fa == fb && strings.EqualFold(na, nb)
}

// lowerNames are the names equalLower, hasPrefixLower and hasSuffixLower
// compare with.
func lowerNames() []string {
	names := []string{
		"age", "retry-after", "retry-after-ms", "ratelimit", "ratelimit-", "sforce-limit-info",
		"anthropic-ratelimit-", "x-ratelimit-", "x-rate-limit-", "x-ms-retry-after-ms",
		"x-ms-ratelimit-remaining-", "x-shopify-shop-api-call-limit", "x-ai-ratelimit-",
		"x-hubspot-ratelimit-", "x-retry-in", "policy", "limit", "remaining", "reset", "resettime", "observed", "name",
		"limit-", "remaining-", "reset-", "-limit", "-remaining", "-reset",
	}
	names = append(names, "used", "limit", "reset", "scope", "bucket", "resource", "fillrate",
		"remaining", "reset-after", "interval-seconds") // xFixed's
	for _, f := range hubSpotFields {
		names = append(names, f.field)
	}
	return append(names, commonNames[:]...)
}

// foldAgrees reports whether equalLower, hasPrefixLower and hasSuffixLower
// say of x and name what equalFold says.
func foldAgrees(x, name string) bool {
	n := len(name)
	prefix := len(x) >= n && equalFold(x[:n], name)
	suffix := len(x) > n && equalFold(x[len(x)-n:], name)
	return equalLower(x, name) == equalFold(x, name) &&
		hasPrefixLower(x, name) == prefix && hasSuffixLower(x, name) == suffix
}

// TestEqualLower holds equalLower, hasPrefixLower and hasSuffixLower to
// equalFold on every name they compare with, changed in one byte to each
// of the 256 values, in every case, alone and with bytes around.
func TestEqualLower(t *testing.T) {
	for _, name := range lowerNames() {
		require.Equal(t, strings.ToLower(name), name)
		for _, s := range []string{name, strings.ToUpper(name), http.CanonicalHeaderKey(name)} {
			for i := range len(s) {
				for c := range 256 {
					x := s[:i] + string([]byte{byte(c)}) + s[i+1:]
					for _, y := range []string{x, x + "-tail", "head-" + x, x[:len(x)-1]} {
						if !foldAgrees(y, name) {
							t.Fatalf("%q against %q", y, name)
						}
					}
				}
			}
		}
	}
}

// FuzzEqualLower holds the word-wise comparisons to equalFold on any
// string, against every name they compare with.
func FuzzEqualLower(f *testing.F) {
	for _, name := range lowerNames() {
		f.Add(name)
		f.Add(strings.ToUpper(name) + "x")
	}
	names := lowerNames()
	f.Fuzz(func(t *testing.T, x string) {
		for _, name := range names {
			if !foldAgrees(x, name) {
				t.Fatalf("%q against %q", x, name)
			}
		}
	})
}

// TestReach holds reach to what comparing time.Unix(sec, nsec).Sub(now)
// with maxAhead says, around its bounds, for clocks near and far.
func TestReach(t *testing.T) {
	nows := []time.Time{
		now, now.Add(123456789), time.Unix(0, 0), time.Unix(-1, 999999999), {},
		time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Unix(1<<62, 0), time.Unix(-1<<62, 0), time.Unix(1<<63-1, 999999999), time.Unix(-1<<63, 0),
		time.Unix(-1<<63, 0).Add(-1 << 62), // its Unix seconds wrap around to positive
	}
	const most = int64(maxAhead / time.Second)
	for _, n := range nows {
		secs := []int64{0, 1e9, 1704207630, 1e18 - 1, -1, -62135596800, -1e12}
		for _, ds := range []int64{0, 1, most - 1, most, most + 1, most + 2, 1 << 40} {
			secs = append(secs, n.Unix()+ds, n.Unix()-ds)
		}
		for _, sec := range secs {
			for _, nsec := range []int64{0, 1, int64(n.Nanosecond()), int64(n.Nanosecond()) + 1, 999999999} {
				if sec <= -1<<61 || sec >= 1<<61 || nsec > 999999999 {
					continue // reach's callers pass |sec| < 2^61
				}
				d := time.Unix(sec, nsec).Sub(n)
				want := 0
				if d > maxAhead {
					want = 1
				} else if d < -maxAhead {
					want = -1
				}
				assert.Equal(t, want, reach(sec, nsec, n), "%d.%09d from %v", sec, nsec, n)
			}
		}
	}
}

// goDuration is what parseGoDuration answers, by its definition:
// time.ParseDuration's reading of a string that starts with a digit or a
// dot and ends with a letter, if it is within [0, maxAhead].
func goDuration(s string) (time.Duration, bool) {
	if s == "" || !(isDigit(s[0]) || s[0] == '.') || !isAlpha(s[len(s)-1]) {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > maxAhead {
		return 0, false
	}
	return d, true
}

// goDurations are durations in the forms parseGoDuration reads quickly,
// around their bounds, and others.
var goDurations = []string{
	"6m0s", "1h2m3.5s", "20ms", "1µs", "1μs", "3us", "7ns", ".5s", "1.s", "8784h", "8785h",
	"2024-01-02T15:04:06Z", "1mm", "1x", "1h-", "1S", "1H", "5 s", "1e3s", "1s ", "0x1s",
	"0s", "0ms", "2s", "120ms", "007ms", "1.0s", "1.5s", "1.5ms", "ms", "s", "m", "1m", "1h",
	"31622400s", "31622401s", "31622400000ms", "31622400001ms", "999999999999999999s",
	"9223372036854775807ms", "9999999999999999999s", "18446744073709551616s", "1234567890123456789ms", "-1s", "+1s",
}

// TestParseGoDuration: parseGoDuration's shortcuts (whole seconds and
// milliseconds; refusing early the bytes no duration has) change no
// answer.
func TestParseGoDuration(t *testing.T) {
	for _, s := range append(goDurations, fuzzValues...) {
		want, wantOK := goDuration(s)
		got, ok := parseGoDuration(s)
		assert.Equal(t, wantOK, ok, "%q", s)
		assert.Equal(t, want, got, "%q", s)
	}
	assert.Zero(t, testing.AllocsPerRun(100, func() { parseGoDuration("120ms") }))
}

func FuzzParseGoDuration(f *testing.F) {
	for _, s := range goDurations {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, wantOK := goDuration(s)
		if got, ok := parseGoDuration(s); got != want || ok != wantOK {
			t.Fatalf("%q: got %v, %v; want %v, %v", s, got, ok, want, wantOK)
		}
	})
}

// TestParseSpellingsInKeyOrder: the lines of a field spelt three ways come
// in the order of their keys, whatever order the map gives them in. They
// came in map order when a third spelling met the first two.
func TestParseSpellingsInKeyOrder(t *testing.T) {
	h := http.Header{
		"X-Rate-Limit-Limit":         {"1"}, // sorts first: '-' < 'L'
		"X-RateLimit-Limit":          {"2"},
		"x-ratelimit-limit":          {"3"},
		"X-RateLimit-Remaining":      {"0", "1", "2"},
		"x-ratelimit-limit-Requests": {"10"}, // a named field spelt two ways,
		"X-RateLimit-Requests-Limit": {"20"}, // the Linear form sorting first
	}
	want := []Quota{
		{Limit: 1, Remaining: 0},
		{Limit: 2, Remaining: 1},
		{Limit: 3, Remaining: 2},
		{Name: "requests", Limit: 20, Remaining: -1, Unit: "requests"},
		{Name: "requests", Limit: 10, Remaining: -1, Unit: "requests"},
	}
	for range 50 {
		require.Equal(t, want, Parse(h, now).Quotas)
	}
}

// shortcutCases returns lines for n fields: every value of the fuzz corpus
// (and a few more) in each field, alone and with "42" in another field.
func shortcutCases(n int) [][][]string {
	values := append([]string{" ", " 5000 ", "1704211200", "core", "0;w=60", "42;w=60", "120ms",
		"Tue, 02 Jan 2024 15:00:30 GMT", "Microsoft.Compute/HighCostGet3Min;159"}, fuzzValues...)
	var cases [][][]string
	for i := range n {
		for _, v := range values {
			c := make([][]string, n)
			c[i] = []string{v}
			cases = append(cases, c)
			for j := range n {
				if j != i {
					c2 := slices.Clone(c)
					c2[j] = []string{"42"}
					cases = append(cases, c2)
				}
			}
		}
	}
	return cases
}

// TestShortcuts holds the shortcuts for one line per field
// (positional.single, named.single) to the general paths (appendRows,
// appendNamedRows) on shortcutCases, and checks that each is taken for
// most of them.
func TestShortcuts(t *testing.T) {
	shortcut(t, "positional", 10, func(c [][]string) (bool, []Quota, []Quota) {
		p := positional{posLimit: c[0], posRemaining: c[2], posReset: c[3], posResetAfter: c[4],
			posResetTime: c[5], posUsed: c[6], posName: c[7], posInterval: c[8], posFillRate: c[9]}
		taken := c[1] == nil && p.single(&row{})
		return taken, appendRows(nil, &p, c[1], now), appendPositional(nil, &p, c[1], now)
	})
	for _, fam := range []family{famX, famAnthropic, famAzure, famAI, famHubSpot} {
		for _, name := range []string{"requests", "minute", "daily", "resource"} {
			shortcut(t, name, 4, func(c [][]string) (bool, []Quota, []Quota) {
				g := named{fam: fam, name: name, fields: [4][]string{c[0], c[1], c[2], c[3]}}
				taken := g.single(&namedRow{})
				return taken, appendNamedRows(nil, &g, now), appendNamed(nil, &g, now)
			})
		}
	}
}

// shortcut runs parse, which says whether its shortcut was taken and what
// the general path and the shortcut gave, on the shortcutCases of n fields.
func shortcut(t *testing.T, what string, n int, parse func([][]string) (bool, []Quota, []Quota)) {
	cases, taken := shortcutCases(n), 0
	for _, c := range cases {
		ok, want, got := parse(c)
		if ok {
			taken++
		}
		if !assert.Equal(t, want, got, "%s: %q", what, c) {
			return
		}
	}
	assert.Greater(t, taken, len(cases)/2, "%s: the shortcut was taken for %d of %d", what, taken, len(cases))
}
