package keyextract

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type extractCase struct {
	name   string
	req    Request
	key    string
	wantOK bool
}

func runExtract(t *testing.T, e Extractor, cases []extractCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key, ok := e.Extract(tc.req)
			assert.Equal(t, tc.wantOK, ok, "ok")
			assert.Equal(t, tc.key, key, "key")
		})
	}
}

func outbound(t *testing.T, method, rawURL string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(method, rawURL, nil)
	require.NoError(t, err)
	return r
}

func TestGlobal(t *testing.T) {
	runExtract(t, Global(), []extractCase{
		{"outbound", HTTP(outbound(t, "GET", "https://a.example/")), "global", true},
		{"inbound", HTTP(newInbound("192.0.2.1:1")), "global", true},
		{"empty", fakeRequest{}, "global", true},
	})
}

func TestHost(t *testing.T) {
	withHost := func(urlHost, host string) Request {
		r := newInbound("192.0.2.1:1")
		r.URL.Host, r.Host = urlHost, host
		return HTTP(r)
	}
	runExtract(t, Host(), []extractCase{
		{"outbound with port", HTTP(outbound(t, "GET", "https://api.example.com:8443/x")), "api.example.com:8443", true},
		{"outbound no port", HTTP(outbound(t, "GET", "https://api.example.com/x")), "api.example.com", true},
		{"upper case lowered", HTTP(outbound(t, "GET", "https://API.Example.COM:443/")), "api.example.com:443", true},
		{"ipv6 literal", HTTP(outbound(t, "GET", "http://[2001:db8::1]:8080/")), "[2001:db8::1]:8080", true},
		{"URL.Host wins over Host override", withHost("dial.example:80", "vhost.example"), "dial.example:80", true},
		{"inbound Host header", withHost("", "Shop.Example:8080"), "shop.example:8080", true},
		{"none", withHost("", ""), "", false},
		{"fake", fakeRequest{host: "x.example"}, "x.example", true},
		{"letters at the ends of A-Z", fakeRequest{host: "AZ@[`{.example"}, "az@[`{.example", true},
		{"non-ASCII lowered as Unicode", fakeRequest{host: "ÉCOLE.example"}, "école.example", true},
	})
}

func TestRoute(t *testing.T) {
	withPattern := func(method, path, pattern string) Request {
		r := newInbound("192.0.2.1:1")
		r.Method, r.URL.Path, r.Pattern = method, path, pattern
		return HTTP(r)
	}
	runExtract(t, Route(), []extractCase{
		{"path", withPattern("GET", "/items/42", ""), "GET /items/42", true},
		{"empty method is GET", withPattern("", "/x", ""), "GET /x", true},
		{"pattern with method", withPattern("GET", "/items/42", "GET /items/{id}"), "GET /items/{id}", true},
		{"pattern with method, HEAD request", withPattern("HEAD", "/items/42", "GET /items/{id}"), "GET /items/{id}", true},
		{"pattern without method", withPattern("DELETE", "/items/42", "/items/{id}"), "DELETE /items/{id}", true},
		{"pattern with host", withPattern("GET", "/a", "example.com/a"), "GET example.com/a", true},
		{"pattern with method and host", withPattern("GET", "/a", "GET example.com/a"), "GET example.com/a", true},
		{"pattern with tab", withPattern("PUT", "/a", "PUT\t/a"), "PUT\t/a", true},
		{"no path", withPattern("GET", "", ""), "", false},
		{"fake without Pattern", fakeRequest{method: "POST", path: "/p"}, "POST /p", true},
	})
}

func TestRouteWithServeMux(t *testing.T) {
	var got string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /items/{id}", func(w http.ResponseWriter, r *http.Request) {
		got, _ = Route().Extract(HTTP(r))
	})
	r := newInbound("192.0.2.1:1")
	r.URL.Path = "/items/7"
	mux.ServeHTTP(httptest.NewRecorder(), r)
	assert.Equal(t, "GET /items/{id}", got)
}

func TestHeader(t *testing.T) {
	r := newInbound("192.0.2.1:1", "X-Api-Key", "k-123", "X-Empty", "", "X-Multi", "a", "X-Multi", "b")
	for _, name := range []string{"X-API-Key", "x-api-key", "X-Api-Key"} {
		t.Run(name, func(t *testing.T) {
			runExtract(t, Header(name), []extractCase{
				{"http", HTTP(r), "k-123", true},
				{"fake", fakeRequest{header: r.Header}, "k-123", true},
			})
		})
	}
	runExtract(t, Header("X-Absent"), []extractCase{{"absent", HTTP(r), "", false}})
	runExtract(t, Header("X-Empty"), []extractCase{{"empty", HTTP(r), "", false}})
	runExtract(t, Header("X-Multi"), []extractCase{{"lines joined", HTTP(r), "a, b", true}})
	assert.PanicsWithValue(t, "keyextract: Header: empty header name", func() { Header("") })
}

func TestFunc(t *testing.T) {
	e := Func(func(r Request) (string, bool) {
		m := r.Method()
		return "m:" + m, m != "DELETE"
	})
	runExtract(t, e, []extractCase{
		{"ok", fakeRequest{method: "GET"}, "m:GET", true},
		{"passes ok through", fakeRequest{method: "DELETE"}, "m:DELETE", false},
	})
	assert.Panics(t, func() { Func(nil) })
}

func TestComposite(t *testing.T) {
	ip := IP()
	hdr := Header("X-Api-Key")
	r := newInbound("192.0.2.1:1", "X-Api-Key", "k-1")
	noKey := newInbound("192.0.2.1:1")
	noPeer := newInbound("", "X-Api-Key", "k-1")
	runExtract(t, Composite("|", ip, hdr), []extractCase{
		{"both", HTTP(r), "192.0.2.1|k-1", true},
		{"second fails", HTTP(noKey), "", false},
		{"first fails", HTTP(noPeer), "", false},
	})
	runExtract(t, Composite("", Global(), hdr, Route()), []extractCase{
		{"empty sep, three parts", HTTP(r), "globalk-1GET /", true},
	})
	runExtract(t, Composite(" :: ", hdr), []extractCase{
		{"one part is that part", HTTP(r), "k-1", true},
	})
	many := make([]Extractor, 10)
	for i := range many {
		many[i] = Global()
	}
	runExtract(t, Composite(",", many...), []extractCase{
		{"more parts than the stack buffer", HTTP(r), "global,global,global,global,global,global,global,global,global,global", true},
	})
	assert.Panics(t, func() { Composite("|") })
	assert.Panics(t, func() { Composite("|", Global(), nil) })

	// Composite copies es: the caller may reuse its slice.
	es := []Extractor{Global(), hdr}
	c := Composite("/", es...)
	es[0] = Route()
	key, ok := c.Extract(HTTP(r))
	assert.True(t, ok)
	assert.Equal(t, "global/k-1", key)
}

func TestAllocsExtractors(t *testing.T) {
	out := HTTP(outbound(t, "GET", "https://api.example.com:8443/x"))
	in := HTTP(newInbound("192.0.2.1:1234", "X-Api-Key", "k-123"))
	cases := []struct {
		name string
		e    Extractor
		r    Request
		max  float64
	}{
		{"Global", Global(), in, 0},
		{"Host", Host(), out, 0},
		{"Header", Header("X-Api-Key"), in, 0},
		{"Header lower-case name", Header("x-api-key"), in, 0},
		{"IP IPv4 peer", IP(), in, 0},
		{"IP IPv4 peer, untrusted, with prefixes", IP(netip.MustParsePrefix("10.0.0.0/8")), in, 0},
		{"Route", Route(), in, 1},
		{"Composite of two", Composite("|", IP(), Header("X-Api-Key")), in, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := testing.AllocsPerRun(200, func() {
				if _, ok := tc.e.Extract(tc.r); !ok {
					panic("no key")
				}
			})
			t.Logf("%s: %v allocs", tc.name, n)
			assert.LessOrEqual(t, n, tc.max)
		})
	}
}
