package keyextract

import (
	"net/http"
	"strings"
)

// Extractor turns a request into a partition key.
//
// Extract returns ok == false when the request carries no key of this kind
// (an absent header, an unknown peer); the key is then "". Implementations
// must be safe for concurrent use.
type Extractor interface {
	Extract(r Request) (key string, ok bool)
}

// globalKey is the key Global returns.
const globalKey = "global"

// Global returns an Extractor that gives every request the key "global", so
// that all requests share one limiter.
func Global() Extractor { return globalExtractor{} }

type globalExtractor struct{}

func (globalExtractor) Extract(Request) (string, bool) { return globalKey, true }

// Host returns an Extractor that keys a request by the host it is for,
// including the port when there is one: "api.example.com:8443". With the
// adapter [HTTP] that is r.URL.Host for an outbound request and the Host
// header for an inbound one.
//
// The key is lower-cased, since host names are case-insensitive; a host that
// is already lower-case is returned as it is, without allocating. Nothing
// else is normalised: "example.com" and "example.com:443" are two keys, as
// are a name and its address. ok is false when the host is empty.
func Host() Extractor { return hostExtractor{} }

type hostExtractor struct{}

func (hostExtractor) Extract(r Request) (string, bool) {
	h := r.Host()
	if h == "" {
		return "", false
	}
	return lowerHost(h), true
}

// lowerHost is h in lower case: h itself, without allocating, when it has
// no upper-case letter, as a host almost never has. (strings.ToLower does
// the same, but tells ASCII from the rest and upper case from lower in one
// pass over every byte: 159 instructions a request against lowerHost's
// 112, callgrind over bench/rtloop's GitHub loop.)
func lowerHost(h string) string {
	for i := 0; i < len(h); i++ {
		if c := h[i]; c-'A' < 26 || c >= 0x80 {
			return strings.ToLower(h)
		}
	}
	return h
}

// Route returns an Extractor that keys a request by its method and route:
// "GET /items/{id}".
//
// When the request has a Pattern method (see [Request]) that returns a
// non-empty pattern, as the adapter [HTTP] does once [http.ServeMux] has
// routed the request, the route is that pattern, so /items/1 and /items/2
// share a key. A pattern that names a method ("GET /items/{id}") is the key
// as it stands; otherwise the key is Method() + " " + pattern. Without a
// pattern the key is Method() + " " + Path(): every distinct path is then a
// key of its own, so use Route only where paths are few, or behind a router
// that sets the pattern. ok is false when both pattern and path are empty.
func Route() Extractor { return routeExtractor{} }

type routeExtractor struct{}

func (routeExtractor) Extract(r Request) (string, bool) {
	route := ""
	if p, ok := r.(patterner); ok {
		route = p.Pattern()
		if route != "" && patternHasMethod(route) {
			return route, true
		}
	}
	if route == "" {
		route = r.Path()
		if route == "" {
			return "", false
		}
	}
	return r.Method() + " " + route, true
}

// patternHasMethod reports whether a ServeMux pattern, "[METHOD ][HOST]/[PATH]",
// starts with a method: a space or tab comes before the first '/'.
func patternHasMethod(p string) bool {
	i := strings.IndexAny(p, " \t/")
	return i > 0 && p[i] != '/'
}

// Header returns an Extractor that keys a request by the value of the named
// header field, e.g. Header("X-API-Key"). The value is the key as it stands
// (several field lines are joined with ", "; see [Request]); ok is false when
// the field is absent or empty. The name is matched case-insensitively.
//
// A header is whatever the client sent: key by it only what the client is
// entitled to choose, such as a credential the server checks.
func Header(name string) Extractor {
	if name == "" {
		panic("keyextract: Header: empty header name")
	}
	return headerExtractor{name: http.CanonicalHeaderKey(name)}
}

type headerExtractor struct{ name string }

func (e headerExtractor) Extract(r Request) (string, bool) {
	v := r.Header(e.name)
	return v, v != ""
}

// Func returns an Extractor that calls f. It panics if f is nil.
func Func(f func(Request) (string, bool)) Extractor {
	if f == nil {
		panic("keyextract: Func: nil function")
	}
	return funcExtractor(f)
}

type funcExtractor func(Request) (string, bool)

func (f funcExtractor) Extract(r Request) (string, bool) { return f(r) }

// Composite returns an Extractor that joins the keys of es, in order, with
// sep: Composite("|", IP(), Header("X-API-Key")) gives "192.0.2.1|k-123". ok
// is false, and the key "", if any of them fails. Choose a sep that cannot
// occur in the parts, or two different pairs of parts could make one key.
// Composite panics if es is empty or holds a nil Extractor.
func Composite(sep string, es ...Extractor) Extractor {
	if len(es) == 0 {
		panic("keyextract: Composite: no extractors")
	}
	for _, e := range es {
		if e == nil {
			panic("keyextract: Composite: nil extractor")
		}
	}
	if len(es) == 1 {
		return es[0]
	}
	return compositeExtractor{sep: sep, es: append([]Extractor(nil), es...)}
}

type compositeExtractor struct {
	sep string
	es  []Extractor
}

func (c compositeExtractor) Extract(r Request) (string, bool) {
	var small [8]string
	parts := small[:0]
	n := len(c.sep) * (len(c.es) - 1)
	for _, e := range c.es {
		k, ok := e.Extract(r)
		if !ok {
			return "", false
		}
		parts = append(parts, k)
		n += len(k)
	}
	var b strings.Builder
	b.Grow(n)
	for i, k := range parts {
		if i > 0 {
			b.WriteString(c.sep)
		}
		b.WriteString(k)
	}
	return b.String(), true
}
