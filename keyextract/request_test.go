package keyextract

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHTTPAdapter(t *testing.T) {
	r, err := http.NewRequest(http.MethodPost, "https://API.example.com:8443/v1/items?q=1", nil)
	require.NoError(t, err)
	r.Host = "override.example"
	r.RemoteAddr = "192.0.2.1:1234"
	r.Header.Add("X-Forwarded-For", "198.51.100.1")
	r.Header.Add("X-Forwarded-For", "198.51.100.2, 198.51.100.3")
	r.Header.Set("X-Api-Key", "k1")
	r.Pattern = "POST /v1/items"

	a := HTTP(r)
	assert.Equal(t, "POST", a.Method())
	assert.Equal(t, "API.example.com:8443", a.Host(), "URL.Host wins over r.Host")
	assert.Equal(t, "/v1/items", a.Path())
	assert.Equal(t, "192.0.2.1:1234", a.RemoteAddr())
	assert.Equal(t, "k1", a.Header("x-api-key"))
	assert.Equal(t, "198.51.100.1, 198.51.100.2, 198.51.100.3", a.Header("X-Forwarded-For"))
	assert.Equal(t, "", a.Header("Absent"))
	assert.Equal(t, []string{"198.51.100.1", "198.51.100.2, 198.51.100.3"}, a.(valueser).Values("x-forwarded-for"))
	assert.Equal(t, "POST /v1/items", a.(patterner).Pattern())

	r.URL.Host = ""
	assert.Equal(t, "override.example", a.Host(), "r.Host when URL.Host is empty")
	r.Method = ""
	assert.Equal(t, "GET", a.Method(), "empty method is GET")
	r.URL = nil
	assert.Equal(t, "override.example", a.Host())
	assert.Equal(t, "", a.Path())

	assert.Nil(t, HTTP(nil))
}

func TestHTTPAdapterDoesNotModify(t *testing.T) {
	r := newInbound("192.0.2.1:1", "X-Forwarded-For", "198.51.100.1", "X-Forwarded-For", "198.51.100.2")
	before := r.Header.Clone()
	u := *r.URL
	_, _ = IP(mustPrefixes("192.0.2.0/24")...).Extract(HTTP(r))
	_ = HTTP(r).Header("X-Forwarded-For")
	assert.Equal(t, before, r.Header)
	assert.Equal(t, u, *r.URL)
	assert.Equal(t, url.URL{Path: "/"}, u)
}

func TestAllocsHTTPAdapter(t *testing.T) {
	r := newInbound("192.0.2.1:1234", "X-Api-Key", "k1")
	var sink Request
	n := testing.AllocsPerRun(100, func() { sink = HTTP(r) })
	assert.Zero(t, n, "HTTP allocates")
	_ = sink
	n = testing.AllocsPerRun(100, func() {
		a := HTTP(r)
		_ = a.Method()
		_ = a.Host()
		_ = a.Path()
		_ = a.RemoteAddr()
		_ = a.Header("X-Api-Key")
	})
	assert.Zero(t, n, "adapter methods allocate")
}
