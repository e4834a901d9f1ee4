package headers

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// refCorpus returns the headers the differential tests start from: the
// cases of TestParseRealWorld and TestParseDialects, the fixtures, every
// known name with every fuzz value (one line and two), pairs of names, and
// the shortcut cases spread over the X-RateLimit-* and OpenAI fields.
func refCorpus() []http.Header {
	var hs []http.Header
	for _, c := range append(realWorldCases(), dialectCases()...) {
		hs = append(hs, c.h)
	}
	for _, c := range fixtures() {
		hs = append(hs, c.h)
	}
	for _, k := range fuzzKeys {
		for _, v := range fuzzValues {
			hs = append(hs, http.Header{k: {v}}, http.Header{k: {v, "1"}}, http.Header{k: {"7", v}})
		}
	}
	for i, k := range fuzzKeys {
		for _, k2 := range fuzzKeys[i+1:] {
			hs = append(hs, http.Header{k: {"0"}, k2: {"30, 1704207630"}}, http.Header{k: {"5"}, k2: {"6"}})
		}
	}
	families := [][]string{
		{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "X-RateLimit-Reset-After",
			"X-RateLimit-Used", "X-RateLimit-Resource", "X-RateLimit-Interval-Seconds", "X-RateLimit-FillRate",
			"X-RateLimit-Bucket", "Retry-After"},
		{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "RateLimit-ResetTime",
			"RateLimit-Observed", "RateLimit-Name", "RateLimit-Policy", "RateLimit", "Age", "Retry-After-Ms"},
		{"X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests",
			"X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens",
			"X-HubSpot-RateLimit-Max", "X-HubSpot-RateLimit-Interval-Milliseconds",
			"X-Ms-Ratelimit-Remaining-Resource", "Sforce-Limit-Info"},
		{"X-Ratelimit-Limit-Short", "X-Ratelimit-Remaining-Short", "X-Ratelimit-Reset-Short", "Retry-After-Short",
			"Retry-After", "Retry-After-Long"},
	}
	for _, keys := range families {
		for _, c := range shortcutCases(len(keys)) {
			h := http.Header{}
			for i, vs := range c {
				if vs != nil {
					h[keys[i]] = vs
				}
			}
			hs = append(hs, h)
		}
	}
	return hs
}

// variants returns h with its names recased by the LCG seed (canonical,
// lower, upper, mixed), and h with a second spelling of each of its names
// holding other lines: what a proxy that rewrites names, or a map literal,
// makes of a header.
func variants(h http.Header, seed *uint64) []http.Header {
	rnd := func() uint64 {
		*seed = *seed*6364136223846793005 + 1442695040888963407 // a fixed LCG: failures reproduce
		return *seed >> 33
	}
	mixed := func(s string) string {
		b := []byte(s)
		for i := range b {
			if rnd()&1 == 0 {
				b[i] = strings.ToUpper(s[i : i+1])[0]
			} else {
				b[i] = strings.ToLower(s[i : i+1])[0]
			}
		}
		return string(b)
	}
	out := []http.Header{h}
	for _, f := range []func(string) string{http.CanonicalHeaderKey, strings.ToLower, strings.ToUpper, mixed} {
		h2 := http.Header{}
		for k, vs := range h {
			h2[f(k)] = vs
		}
		out = append(out, h2)
	}
	dup := http.Header{}
	for k, vs := range h {
		dup[k] = vs
		other := vs[len(vs)-1:]
		if rnd()&1 == 0 {
			other = []string{"1", "0"}
		}
		dup[mixed(k)] = other // may land on k itself: then k holds other
	}
	return append(out, dup)
}

// matchesRef reports whether Parse and the frozen parseRef agree on h.
func matchesRef(t *testing.T, h http.Header) bool {
	t.Helper()
	want, got := parseRef(h, now), Parse(h, now)
	if !reflect.DeepEqual(want, got) {
		t.Errorf("Parse(%q):\n got %+v\nwant %+v", h, got, want)
		return false
	}
	return true
}

// TestParseMatchesRef holds Parse to parseRef, the copy of it before it was
// made cheaper, on refCorpus and the variants of each of its headers.
func TestParseMatchesRef(t *testing.T) {
	seed := uint64(1)
	n := 0
	for _, h := range refCorpus() {
		for _, v := range variants(h, &seed) {
			n++
			if !matchesRef(t, v) {
				return
			}
		}
	}
	if n < 10000 {
		t.Fatalf("only %d headers compared", n)
	}
}

// FuzzParseMatchesRef holds Parse to parseRef on headers made of known
// names (chosen by pick, spelt by spell) holding the lines a and b, and on
// an arbitrary name.
func FuzzParseMatchesRef(f *testing.F) {
	for i, s := range fuzzValues {
		f.Add(s, "", uint64(i)*0x9e3779b97f4a7c15, uint64(i))
		f.Add(s, s, uint64(1)<<(i%len(fuzzKeys)), uint64(0))
		f.Add("5000", s, uint64(0b111<<11), uint64(i))
	}
	f.Fuzz(func(t *testing.T, a, b string, pick, spell uint64) {
		h := http.Header{}
		for i, k := range fuzzKeys {
			if pick>>(i%64)&1 == 0 {
				continue
			}
			switch (spell >> (i % 32 * 2)) & 3 {
			case 1:
				k = strings.ToLower(k)
			case 2:
				k = strings.ToUpper(k)
			}
			switch (pick >> ((i + 7) % 64)) & 3 {
			case 0:
				h[k] = []string{a}
			case 1:
				h[k] = []string{a, b}
			case 2:
				h[k] = []string{b}
			default:
				h[k] = []string{a + ", " + b}
			}
		}
		matchesRef(t, h)
		matchesRef(t, http.Header{a: {b}})
		matchesRef(t, http.Header{a: {b}, strings.ToLower(a): {a}})
	})
}

// TestEqualFold holds the word-wise equalFold to the frozen byte-wise
// equalFoldRef: every pair of bytes, at every position of strings of every
// length up to 17, in a string of letters.
func TestEqualFold(t *testing.T) {
	base := "AbCdEfGhIjKlMnOpQ"
	for n := 1; n <= len(base); n++ {
		for i := range n {
			for x := range 256 {
				for y := range 256 {
					a := base[:i] + string([]byte{byte(x)}) + base[i+1:n]
					b := strings.ToLower(base[:i]) + string([]byte{byte(y)}) + strings.ToUpper(base[i+1:n])
					if equalFold(a, b) != equalFoldRef(a, b) {
						t.Fatalf("equalFold(%q, %q) = %v", a, b, !equalFoldRef(a, b))
					}
				}
			}
		}
	}
}

func FuzzEqualFold(f *testing.F) {
	f.Add("Requests", "requests")
	f.Add("Input-Tokens", "input-tokenS")
	f.Add("\xc3\x89x", "\xc3\xa9x")
	f.Fuzz(func(t *testing.T, a, b string) {
		if equalFold(a, b) != equalFoldRef(a, b) {
			t.Fatalf("equalFold(%q, %q) = %v", a, b, !equalFoldRef(a, b))
		}
		if !equalFold(a, strings.ToUpper(a)) && equalFoldRef(a, strings.ToUpper(a)) {
			t.Fatalf("equalFold(%q, upper) is false", a)
		}
	})
}

// TestParseDec holds parseDec, which reads four or eight digits at once, to
// the frozen parseDecRef on numbers of every length and with a stray byte
// at every position.
func TestParseDec(t *testing.T) {
	digits := "12345678901234567890123"
	for n := 0; n <= len(digits); n++ {
		for i := 0; i <= n; i++ {
			for _, c := range []byte{'.', '/', ':', '0', '9', 'a', ' ', 0x80 + '3'} {
				for _, s := range []string{digits[:n], digits[:i] + string([]byte{c}) + digits[i:n]} {
					w, f, ok := parseDec(s)
					rw, rf, rok := parseDecRef(s)
					if w != rw || f != rf || ok != rok {
						t.Fatalf("parseDec(%q) = %d, %d, %v; want %d, %d, %v", s, w, f, ok, rw, rf, rok)
					}
				}
			}
		}
	}
}

func FuzzParseDec(f *testing.F) {
	for _, s := range fuzzValues {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		w, fr, ok := parseDec(s)
		rw, rf, rok := parseDecRef(s)
		if w != rw || fr != rf || ok != rok {
			t.Fatalf("parseDec(%q) = %d, %d, %v; want %d, %d, %v", s, w, fr, ok, rw, rf, rok)
		}
	})
}
