package keyextract

import (
	"net/http"
	"strings"
)

// Request is what extractors read: the few parts of a request that keys are
// made of.
//
// Header returns the field's combined value: all of its field lines joined,
// in order, with ", " (RFC 9110, section 5.3), or "" when the field is
// absent. Implementations must not return only the first line: [IP] reads the
// forwarding headers from the right, where the trusted proxies append, and a
// client controls the first line.
//
// A Request may also have either of these methods, which extractors use when
// present:
//
//	Values(name string) []string // every field line of name, in order
//	Pattern() string             // the matched route pattern, e.g. "GET /items/{id}"
//
// [IP] prefers Values to Header (it saves joining the lines); [Route] prefers a
// non-empty Pattern to the path. The adapter returned by [HTTP] has both.
type Request interface {
	// Method is the request method, e.g. "GET".
	Method() string
	// Host is the host, with its port if it has one, that the request is for.
	Host() string
	// Path is the URL path, unescaped.
	Path() string
	// Header is the combined value of the named field, or "".
	Header(name string) string
	// RemoteAddr is the network address of the peer, "ip:port" for TCP;
	// "" for an outbound request.
	RemoteAddr() string
}

// valueser is the optional interface [IP] uses to read header lines without
// joining them.
type valueser interface {
	Values(name string) []string
}

// patterner is the optional interface [Route] uses to key by route pattern.
type patterner interface {
	Pattern() string
}

// httpRequest adapts *http.Request to Request. A struct holding one pointer
// is stored in an interface as the pointer itself, so the adapter costs no
// allocation. (The obvious `type httpRequest http.Request` cannot work: its
// fields Method, Host and RemoteAddr would clash with the methods.)
type httpRequest struct{ r *http.Request }

// HTTP adapts r to [Request] without allocating. The adapter reads r on each
// call and never modifies it.
//
//   - Method is r.Method, "GET" when that is empty (as net/http reads it);
//   - Host is r.URL.Host when it is not empty, else r.Host: for an outbound
//     request that is the server being dialled (even when r.Host overrides
//     the Host header), for an inbound one the Host header;
//   - Path is r.URL.Path;
//   - Header joins a field's lines with ", "; it allocates only when there
//     is more than one line. Values returns the lines themselves;
//   - RemoteAddr is r.RemoteAddr;
//   - Pattern is r.Pattern, set by [http.ServeMux] when it routes r.
//
// HTTP(nil) returns nil.
func HTTP(r *http.Request) Request {
	if r == nil {
		return nil
	}
	return httpRequest{r}
}

var (
	_ Request   = httpRequest{}
	_ valueser  = httpRequest{}
	_ patterner = httpRequest{}
)

func (h httpRequest) Method() string {
	if h.r.Method == "" {
		return http.MethodGet
	}
	return h.r.Method
}

func (h httpRequest) Host() string {
	if h.r.URL != nil && h.r.URL.Host != "" {
		return h.r.URL.Host
	}
	return h.r.Host
}

func (h httpRequest) Path() string {
	if h.r.URL == nil {
		return ""
	}
	return h.r.URL.Path
}

func (h httpRequest) Header(name string) string {
	vs := h.Values(name)
	switch len(vs) {
	case 0:
		return ""
	case 1:
		return vs[0]
	}
	return strings.Join(vs, ", ")
}

func (h httpRequest) Values(name string) []string { return h.r.Header.Values(name) }

func (h httpRequest) RemoteAddr() string { return h.r.RemoteAddr }

func (h httpRequest) Pattern() string { return h.r.Pattern }
