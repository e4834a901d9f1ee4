package keyextract

import (
	"net/http"
	"strings"
	"unsafe"
)

// fakeRequest is a Request without the optional methods, as a framework's
// adapter might be: Header joins lines itself.
type fakeRequest struct {
	method, host, path, remote string
	header                     http.Header
}

func (f fakeRequest) Method() string     { return f.method }
func (f fakeRequest) Host() string       { return f.host }
func (f fakeRequest) Path() string       { return f.path }
func (f fakeRequest) RemoteAddr() string { return f.remote }
func (f fakeRequest) Header(name string) string {
	return strings.Join(f.header.Values(name), ", ")
}

// newInbound returns an inbound *http.Request from remote with the given
// header lines, as name, value pairs.
func newInbound(remote string, kv ...string) *http.Request {
	r, err := http.NewRequest(http.MethodGet, "/", nil)
	if err != nil {
		panic(err)
	}
	r.URL.Host = ""
	r.Host = "example.com"
	r.RemoteAddr = remote
	for i := 0; i+1 < len(kv); i += 2 {
		r.Header.Add(kv[i], kv[i+1])
	}
	return r
}

func unsafeData(s string) *byte { return unsafe.StringData(s) }
