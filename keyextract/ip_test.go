package keyextract

import (
	"net/http"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
)

func mustPrefixes(ss ...string) []netip.Prefix {
	ps := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		ps[i] = netip.MustParsePrefix(s)
	}
	return ps
}

type ipCase struct {
	name   string
	remote string
	header []string // name, value pairs; repeated names are separate lines
	key    string
	ok     bool
}

// runIP runs cases against both the HTTP adapter (Values) and a Request
// that only has Header (lines joined), which must agree.
func runIP(t *testing.T, e Extractor, cases []ipCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newInbound(tc.remote, tc.header...)
			key, ok := e.Extract(HTTP(r))
			assert.Equal(t, tc.ok, ok, "ok")
			assert.Equal(t, tc.key, key, "key")

			key, ok = e.Extract(fakeRequest{remote: tc.remote, header: r.Header})
			assert.Equal(t, tc.ok, ok, "ok, joined lines")
			assert.Equal(t, tc.key, key, "key, joined lines")
		})
	}
}

const (
	xff = "X-Forwarded-For"
	fwd = "Forwarded"
	xri = "X-Real-IP"
)

func TestIPNoTrustedProxies(t *testing.T) {
	runIP(t, IP(), []ipCase{
		{"ipv4", "203.0.113.7:4711", nil, "203.0.113.7", true},
		{"ipv4 without port", "203.0.113.7", nil, "203.0.113.7", true},
		{"forged XFF ignored", "203.0.113.7:1", []string{xff, "1.1.1.1"}, "203.0.113.7", true},
		{"forged Forwarded ignored", "203.0.113.7:1", []string{fwd, "for=1.1.1.1"}, "203.0.113.7", true},
		{"forged X-Real-IP ignored", "203.0.113.7:1", []string{xri, "1.1.1.1"}, "203.0.113.7", true},
		{"ipv6 grouped by /64", "[2001:db8:1:2:3:4:5:6]:443", nil, "2001:db8:1:2::/64", true},
		{"ipv6 same /64 same key", "[2001:db8:1:2::ffff]:443", nil, "2001:db8:1:2::/64", true},
		{"ipv6 other /64", "[2001:db8:1:3::1]:443", nil, "2001:db8:1:3::/64", true},
		{"ipv6 non-canonical", "[2001:DB8:0001:0002:0:0:0:1]:1", nil, "2001:db8:1:2::/64", true},
		{"ipv6 without port", "2001:db8::1", nil, "2001:db8::/64", true},
		{"ipv6 bracketed without port", "[2001:db8::1]", nil, "2001:db8::/64", true},
		{"ipv6 zone", "[fe80::1%eth0]:80", nil, "fe80::/64", true},
		{"ipv4-mapped", "[::ffff:192.0.2.9]:80", nil, "192.0.2.9", true},
		{"ipv4-mapped hex", "[::ffff:c000:209]:80", nil, "192.0.2.9", true},
		{"loopback", "127.0.0.1:80", nil, "127.0.0.1", true},
		{"ipv6 loopback", "[::1]:80", nil, "::/64", true},
		{"empty", "", nil, "", false},
		{"unix socket", "@", nil, "", false},
		{"hostname", "localhost:80", nil, "", false},
		{"bad port", "192.0.2.1:http", nil, "", false},
		{"unclosed bracket", "[2001:db8::1:80", nil, "", false},
		{"ipv4 leading zeros", "192.0.2.01:80", nil, "", false},
		{"garbage", "not an address", nil, "", false},
	})
}

func TestIPXForwardedFor(t *testing.T) {
	e := IP(mustPrefixes("10.0.0.0/8", "2001:db8:ffff::/48")...)
	runIP(t, e, []ipCase{
		{"untrusted peer, forged XFF", "203.0.113.7:1", []string{xff, "1.1.1.1, 10.0.0.1"}, "203.0.113.7", true},
		{"trusted proxy, one hop", "10.0.0.1:1", []string{xff, "198.51.100.5"}, "198.51.100.5", true},
		{"trusted proxy, client forged left", "10.0.0.1:1", []string{xff, "1.1.1.1, 198.51.100.5"}, "198.51.100.5", true},
		{"multiple trusted hops", "10.0.0.1:1", []string{xff, "1.1.1.1, 198.51.100.5, 10.0.0.3, 10.0.0.2"}, "198.51.100.5", true},
		{"all trusted: leftmost", "10.0.0.1:1", []string{xff, "10.0.0.9, 10.0.0.3, 10.0.0.2"}, "10.0.0.9", true},
		{"trusted ipv6 proxy", "[2001:db8:ffff::1]:1", []string{xff, "2001:db8:1:2::99"}, "2001:db8:1:2::/64", true},
		{"ipv6 client behind ipv4 proxy", "10.0.0.1:1", []string{xff, "2001:db8:5:6:7::1"}, "2001:db8:5:6::/64", true},
		{"ipv4-mapped hop", "10.0.0.1:1", []string{xff, "::ffff:198.51.100.5"}, "198.51.100.5", true},
		{"ipv4-mapped trusted hop skipped", "10.0.0.1:1", []string{xff, "198.51.100.5, ::ffff:10.0.0.7"}, "198.51.100.5", true},
		{"ipv4-mapped trusted peer", "[::ffff:10.0.0.1]:1", []string{xff, "198.51.100.5"}, "198.51.100.5", true},
		{"hop with zone", "10.0.0.1:1", []string{xff, "fe80::1%eth0"}, "fe80::/64", true},
		{"hop with port", "10.0.0.1:1", []string{xff, "198.51.100.5:4711"}, "198.51.100.5", true},
		{"ipv6 hop with port", "10.0.0.1:1", []string{xff, "[2001:db8::5]:4711"}, "2001:db8::/64", true},
		{"ipv6 hop bracketed", "10.0.0.1:1", []string{xff, "[2001:db8::5]"}, "2001:db8::/64", true},
		{"no spaces", "10.0.0.1:1", []string{xff, "1.1.1.1,198.51.100.5,10.0.0.2"}, "198.51.100.5", true},
		{"tabs and spaces", "10.0.0.1:1", []string{xff, " 198.51.100.5 ,\t10.0.0.2\t"}, "198.51.100.5", true},
		{"lines walked from the last", "10.0.0.1:1", []string{xff, "1.1.1.1", xff, "198.51.100.5, 10.0.0.2"}, "198.51.100.5", true},
		{"trusted hops across lines", "10.0.0.1:1", []string{xff, "1.1.1.1, 198.51.100.5", xff, "10.0.0.2"}, "198.51.100.5", true},
		{"garbage rightmost: peer", "10.0.0.1:1", []string{xff, "1.1.1.1, garbage"}, "10.0.0.1", true},
		{"garbage after trusted hop: last good", "10.0.0.1:1", []string{xff, "1.1.1.1, garbage, 10.0.0.2"}, "10.0.0.2", true},
		{"never skip garbage to a forged value", "10.0.0.1:1", []string{xff, "1.1.1.1, 10.0.0.3, unknown, 10.0.0.2"}, "10.0.0.2", true},
		{"empty element stops", "10.0.0.1:1", []string{xff, "1.1.1.1,, 10.0.0.2"}, "10.0.0.2", true},
		{"trailing comma: peer", "10.0.0.1:1", []string{xff, "198.51.100.5,"}, "10.0.0.1", true},
		{"hostname hop", "10.0.0.1:1", []string{xff, "evil.example"}, "10.0.0.1", true},
		{"bad port hop", "10.0.0.1:1", []string{xff, "198.51.100.5:abc"}, "10.0.0.1", true},
		{"ipv6 with bare port is an address", "10.0.0.1:1", []string{xff, "2001:db8::5:4711"}, "2001:db8::/64", true},
		{"empty XFF: X-Real-IP", "10.0.0.1:1", []string{xff, "", xri, "198.51.100.8"}, "198.51.100.8", true},
		{"no header: peer", "10.0.0.1:1", nil, "10.0.0.1", true},
	})
}

func TestIPForwarded(t *testing.T) {
	e := IP(mustPrefixes("10.0.0.0/8", "2001:db8:ffff::/48")...)
	runIP(t, e, []ipCase{
		{"untrusted peer, forged", "203.0.113.7:1", []string{fwd, "for=1.1.1.1"}, "203.0.113.7", true},
		{"one hop", "10.0.0.1:1", []string{fwd, "for=198.51.100.5"}, "198.51.100.5", true},
		{"case-insensitive name", "10.0.0.1:1", []string{fwd, "For=198.51.100.5"}, "198.51.100.5", true},
		{"quoted ipv4", "10.0.0.1:1", []string{fwd, `for="198.51.100.5"`}, "198.51.100.5", true},
		{"quoted ipv4 with port", "10.0.0.1:1", []string{fwd, `for="198.51.100.5:4711"`}, "198.51.100.5", true},
		{"quoted ipv6 with port", "10.0.0.1:1", []string{fwd, `for="[2001:db8::1]:4711"`}, "2001:db8::/64", true},
		{"quoted ipv6", "10.0.0.1:1", []string{fwd, `for="[2001:db8:cafe::17]"`}, "2001:db8:cafe::/64", true},
		{"unquoted ipv6 tolerated", "10.0.0.1:1", []string{fwd, `for=[2001:db8::1]:80`}, "2001:db8::/64", true},
		{"obfuscated port", "10.0.0.1:1", []string{fwd, `for="198.51.100.5:_p1"`}, "198.51.100.5", true},
		{"ipv4-mapped", "10.0.0.1:1", []string{fwd, `for="[::ffff:198.51.100.5]"`}, "198.51.100.5", true},
		{"zone", "10.0.0.1:1", []string{fwd, `for="[fe80::1%25eth0]"`}, "fe80::/64", true},
		{"other params", "10.0.0.1:1", []string{fwd, "for=198.51.100.5;proto=https;by=10.0.0.1"}, "198.51.100.5", true},
		{"params with spaces", "10.0.0.1:1", []string{fwd, "by=10.0.0.1; for=198.51.100.5; proto=http"}, "198.51.100.5", true},
		{"quoted comma in other param", "10.0.0.1:1", []string{fwd, `for=1.1.1.1, for=198.51.100.5;host="a,b"`}, "198.51.100.5", true},
		{"escaped quote in other param", "10.0.0.1:1", []string{fwd, `for=1.1.1.1, for=198.51.100.5;ext="a\",b"`}, "198.51.100.5", true},
		{"escaped backslash in other param", "10.0.0.1:1", []string{fwd, `for=198.51.100.5;ext="a\\"`}, "198.51.100.5", true},
		{"client forged left", "10.0.0.1:1", []string{fwd, "for=1.1.1.1, for=198.51.100.5"}, "198.51.100.5", true},
		{"multiple trusted hops", "10.0.0.1:1", []string{fwd, `for=1.1.1.1, for=198.51.100.5, for=10.0.0.3, for="[2001:db8:ffff::2]"`}, "198.51.100.5", true},
		{"all trusted: leftmost", "10.0.0.1:1", []string{fwd, "for=10.0.0.9, for=10.0.0.3"}, "10.0.0.9", true},
		{"lines", "10.0.0.1:1", []string{fwd, "for=1.1.1.1", fwd, "for=198.51.100.5"}, "198.51.100.5", true},
		{"trusted hops across lines", "10.0.0.1:1", []string{fwd, "for=198.51.100.5", fwd, "for=10.0.0.2"}, "198.51.100.5", true},
		{"obfuscated: peer", "10.0.0.1:1", []string{fwd, "for=_hidden"}, "10.0.0.1", true},
		{"unknown: peer", "10.0.0.1:1", []string{fwd, "for=unknown"}, "10.0.0.1", true},
		{"quoted unknown: peer", "10.0.0.1:1", []string{fwd, `for="unknown"`}, "10.0.0.1", true},
		{"obfuscated after trusted hop: last good", "10.0.0.1:1", []string{fwd, "for=1.1.1.1, for=_hidden, for=10.0.0.2"}, "10.0.0.2", true},
		{"unknown after trusted hop: last good", "10.0.0.1:1", []string{fwd, "for=1.1.1.1, for=unknown, for=10.0.0.2"}, "10.0.0.2", true},
		{"forged unterminated quote left of real hop", "10.0.0.1:1", []string{fwd, `for="1.1.1.1, for=198.51.100.5`}, "198.51.100.5", true},
		{"unterminated quote on the right: peer", "10.0.0.1:1", []string{fwd, `for=1.1.1.1, for="198.51.100.5`}, "10.0.0.1", true},
		{"no for: peer", "10.0.0.1:1", []string{fwd, "proto=https;by=10.0.0.1"}, "10.0.0.1", true},
		{"no for after trusted hop: last good", "10.0.0.1:1", []string{fwd, "for=1.1.1.1, proto=http, for=10.0.0.2"}, "10.0.0.2", true},
		{"two for: malformed", "10.0.0.1:1", []string{fwd, "for=198.51.100.5;for=1.1.1.1"}, "10.0.0.1", true},
		{"bare ipv6 quoted: malformed", "10.0.0.1:1", []string{fwd, `for="2001:db8::1"`}, "10.0.0.1", true},
		{"ipv4 in brackets: malformed", "10.0.0.1:1", []string{fwd, `for="[198.51.100.5]"`}, "10.0.0.1", true},
		{"escape in for: malformed", "10.0.0.1:1", []string{fwd, `for="198.51.100.\5"`}, "10.0.0.1", true},
		{"bad port", "10.0.0.1:1", []string{fwd, `for="198.51.100.5:123456"`}, "10.0.0.1", true},
		{"bad obfuscated port", "10.0.0.1:1", []string{fwd, `for="198.51.100.5:_a/b"`}, "10.0.0.1", true},
		{"empty value", "10.0.0.1:1", []string{fwd, "for="}, "10.0.0.1", true},
		{"no equals", "10.0.0.1:1", []string{fwd, "for"}, "10.0.0.1", true},
		{"junk after value", "10.0.0.1:1", []string{fwd, `for="198.51.100.5"x`}, "10.0.0.1", true},
		{"empty element stops", "10.0.0.1:1", []string{fwd, "for=1.1.1.1, , for=10.0.0.2"}, "10.0.0.2", true},
		{"Forwarded preferred to XFF", "10.0.0.1:1", []string{fwd, "for=198.51.100.5", xff, "198.51.100.6"}, "198.51.100.5", true},
		{"malformed Forwarded does not fall back", "10.0.0.1:1", []string{fwd, "for=unknown", xff, "198.51.100.6"}, "10.0.0.1", true},
		{"empty Forwarded: XFF", "10.0.0.1:1", []string{fwd, "", xff, "198.51.100.6"}, "198.51.100.6", true},
	})
}

func TestIPXRealIP(t *testing.T) {
	e := IP(mustPrefixes("10.0.0.0/8")...)
	runIP(t, e, []ipCase{
		{"trusted peer", "10.0.0.1:1", []string{xri, "198.51.100.5"}, "198.51.100.5", true},
		{"trusted peer, trusted value: one hop only", "10.0.0.1:1", []string{xri, "10.0.0.9"}, "10.0.0.9", true},
		{"untrusted peer", "203.0.113.7:1", []string{xri, "198.51.100.5"}, "203.0.113.7", true},
		{"ipv6", "10.0.0.1:1", []string{xri, "2001:db8:1:2::5"}, "2001:db8:1:2::/64", true},
		{"with port", "10.0.0.1:1", []string{xri, "198.51.100.5:80"}, "198.51.100.5", true},
		{"spaces", "10.0.0.1:1", []string{xri, " 198.51.100.5 "}, "198.51.100.5", true},
		{"garbage: peer", "10.0.0.1:1", []string{xri, "garbage"}, "10.0.0.1", true},
		{"a list: peer", "10.0.0.1:1", []string{xri, "1.1.1.1, 198.51.100.5"}, "10.0.0.1", true},
		{"two lines: peer", "10.0.0.1:1", []string{xri, "1.1.1.1", xri, "198.51.100.5"}, "10.0.0.1", true},
		{"XFF preferred", "10.0.0.1:1", []string{xri, "198.51.100.5", xff, "198.51.100.6"}, "198.51.100.6", true},
	})
}

func TestIPTrustedPrefixes(t *testing.T) {
	t.Run("mapped prefix matches ipv4", func(t *testing.T) {
		e := IP(netip.MustParsePrefix("::ffff:10.0.0.0/104"))
		runIP(t, e, []ipCase{
			{"trusted", "10.1.2.3:1", []string{xff, "198.51.100.5"}, "198.51.100.5", true},
			{"untrusted", "11.1.2.3:1", []string{xff, "198.51.100.5"}, "11.1.2.3", true},
		})
	})
	t.Run("unmasked prefix", func(t *testing.T) {
		e := IP(netip.MustParsePrefix("10.1.2.3/8"))
		runIP(t, e, []ipCase{{"trusted", "10.9.9.9:1", []string{xff, "198.51.100.5"}, "198.51.100.5", true}})
	})
	t.Run("single address", func(t *testing.T) {
		e := IP(netip.MustParsePrefix("10.0.0.1/32"))
		runIP(t, e, []ipCase{
			{"trusted", "10.0.0.1:1", []string{xff, "10.0.0.2"}, "10.0.0.2", true},
			{"untrusted", "10.0.0.2:1", []string{xff, "198.51.100.5"}, "10.0.0.2", true},
		})
	})
	t.Run("zoned peer in trusted prefix", func(t *testing.T) {
		e := IP(netip.MustParsePrefix("fe80::/10"))
		runIP(t, e, []ipCase{{"trusted", "[fe80::1%eth0]:1", []string{xff, "198.51.100.5"}, "198.51.100.5", true}})
	})
	t.Run("invalid prefix panics", func(t *testing.T) {
		assert.Panics(t, func() { IP(netip.Prefix{}) })
	})
}

func TestIPKeyIsNotAHeaderSubstring(t *testing.T) {
	// A key taken from a header is a copy: keeping it must not keep a large
	// forged header alive.
	e := IP(mustPrefixes("10.0.0.0/8")...)
	r := newInbound("10.0.0.1:1", xff, "198.51.100.5")
	key, ok := e.Extract(HTTP(r))
	assert.True(t, ok)
	h := r.Header.Get(xff)
	assert.NotSame(t, unsafeData(h), unsafeData(key))
}

func TestAllocsIP(t *testing.T) {
	trusted := IP(mustPrefixes("10.0.0.0/8")...)
	cases := []struct {
		name string
		e    Extractor
		r    *http.Request
		max  float64
	}{
		{"ipv4 peer", IP(), newInbound("203.0.113.7:4711"), 0},
		{"ipv4 peer, forged XFF", trusted, newInbound("203.0.113.7:4711", xff, "1.1.1.1"), 0},
		{"ipv6 peer", IP(), newInbound("[2001:db8::1]:4711"), 1},
		{"ipv4-mapped peer", IP(), newInbound("[::ffff:203.0.113.7]:4711"), 1},
		{"XFF", trusted, newInbound("10.0.0.1:1", xff, "1.1.1.1, 198.51.100.5, 10.0.0.2"), 1},
		{"Forwarded", trusted, newInbound("10.0.0.1:1", fwd, `for=1.1.1.1, for="[2001:db8::1]:4711";proto=https, for=10.0.0.2`), 1},
		{"X-Real-IP", trusted, newInbound("10.0.0.1:1", xri, "198.51.100.5"), 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := HTTP(tc.r)
			n := testing.AllocsPerRun(200, func() {
				if _, ok := tc.e.Extract(req); !ok {
					panic("no key")
				}
			})
			t.Logf("%s: %v allocs", tc.name, n)
			assert.LessOrEqual(t, n, tc.max)
		})
	}
}
