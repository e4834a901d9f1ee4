package keyextract_test

import (
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/throttlekit/throttle/keyextract"
)

// TestIPFromReadsOnlyTheNamedHeader: a proxy that appends to
// X-Forwarded-For but passes a client's Forwarded through lets the client
// choose its key under IP; IPFrom("X-Forwarded-For") closes that.
func TestIPFromReadsOnlyTheNamedHeader(t *testing.T) {
	proxy := netip.MustParsePrefix("10.0.0.0/8")
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.2:4711"
	r.Header.Set("Forwarded", "for=198.51.100.66") // forged by the client
	r.Header.Set("X-Forwarded-For", "203.0.113.9") // appended by the proxy

	key, ok := keyextract.IP(proxy).Extract(keyextract.HTTP(r))
	assert.True(t, ok)
	assert.Equal(t, "198.51.100.66", key, "IP prefers Forwarded: the documented hazard")

	key, ok = keyextract.IPFrom("x-forwarded-for", proxy).Extract(keyextract.HTTP(r))
	assert.True(t, ok)
	assert.Equal(t, "203.0.113.9", key)

	key, _ = keyextract.IPFrom("Forwarded", proxy).Extract(keyextract.HTTP(r))
	assert.Equal(t, "198.51.100.66", key)

	// Without the named header, the trusted peer is the client.
	key, _ = keyextract.IPFrom("X-Real-IP", proxy).Extract(keyextract.HTTP(r))
	assert.Equal(t, "10.0.0.2", key)

	// From an untrusted peer nothing is read.
	r.RemoteAddr = "192.0.2.7:1234"
	key, _ = keyextract.IPFrom("X-Forwarded-For", proxy).Extract(keyextract.HTTP(r))
	assert.Equal(t, "192.0.2.7", key)

	assert.Panics(t, func() { keyextract.IPFrom("X-Client-IP", proxy) })
}
