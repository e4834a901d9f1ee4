package keyextract

import (
	"net/http"
	"net/netip"
	"strings"
)

// Canonical names of the forwarding headers, so that looking them up in an
// http.Header does not allocate.
const (
	headerForwarded     = "Forwarded"
	headerXForwardedFor = "X-Forwarded-For"
	headerXRealIP       = "X-Real-Ip"
)

// ipv6Bits is how many leading bits of an IPv6 client address make its key:
// a /64 is one subnet, usually one customer, and holds more addresses than
// anyone could rate-limit one by one.
const ipv6Bits = 64

// IP returns an Extractor that keys a request by the address of the client:
// an IPv4 address ("192.0.2.1") or, for IPv6, the /64 it lies in, in
// canonical form ("2001:db8:1:2::/64"). IPv4-mapped IPv6 addresses count as
// IPv4; zones are dropped.
//
// The client is the peer, RemoteAddr's host, unless the peer is in one of
// the trusted prefixes, that is, one of your own proxies. Only then are the
// forwarding headers read, and only one of them, the first present of:
//
//  1. Forwarded (RFC 7239), its "for" parameters;
//  2. X-Forwarded-For;
//  3. X-Real-IP, a single address.
//
// The forwarding chain is walked from the right, the hop nearest to us, past
// every address that is itself trusted; the first untrusted one is the
// client. If every hop is trusted the leftmost is. The walk stops at the
// first hop that is not an address (garbage, "unknown", an obfuscated
// identifier such as "_hidden", an empty list element) and the last address
// read before it is the client: nothing left of a malformed hop is believed,
// since anyone can write it. Entries may carry a port; IPv6 addresses in
// Forwarded must be bracketed, as RFC 7239 requires.
//
// Without trusted prefixes the headers are never read, so no client can
// choose its own key. With them, make sure the trusted proxies maintain the
// header that is read: a proxy that appends to X-Forwarded-For must remove a
// Forwarded header sent by the client, or the client chooses the key. When
// you know which header your proxies maintain, say so with IPFrom.
//
// ok is false only when no address can be determined at all: RemoteAddr is
// empty or is not an IP address (a Unix socket, say). IP panics if a prefix is
// not valid. Keys from an IPv4 peer whose address is already canonical cost
// no allocation; other keys cost one.
func IP(trusted ...netip.Prefix) Extractor {
	return newIP("", trusted)
}

// IPFrom is IP reading only the named forwarding header — "Forwarded",
// "X-Forwarded-For" or "X-Real-IP" (in any case) — the one your trusted
// proxies maintain, so that a client cannot choose its key by sending one
// of the others. Without the header, a trusted peer is itself the client.
// IPFrom panics on any other header name or an invalid prefix.
func IPFrom(header string, trusted ...netip.Prefix) Extractor {
	switch h := http.CanonicalHeaderKey(header); h {
	case headerForwarded, headerXForwardedFor, headerXRealIP:
		return newIP(h, trusted)
	}
	panic("keyextract: IPFrom: not a forwarding header: " + header)
}

func newIP(only string, trusted []netip.Prefix) Extractor {
	e := ipExtractor{only: only}
	for _, p := range trusted {
		if !p.IsValid() {
			panic("keyextract: IP: invalid trusted prefix " + p.String())
		}
		p = p.Masked()
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		e.trusted = append(e.trusted, p)
	}
	return e
}

type ipExtractor struct {
	trusted []netip.Prefix
	only    string // the one header to read (IPFrom), or "" for the first present
}

func (e ipExtractor) isTrusted(a netip.Addr) bool {
	for _, p := range e.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func (e ipExtractor) Extract(r Request) (string, bool) {
	remote := r.RemoteAddr()
	host, ok := splitRemoteAddr(remote)
	if !ok {
		return "", false
	}
	peer, ok := parseAddr(host)
	if !ok {
		return "", false
	}
	if len(e.trusted) == 0 || !e.isTrusted(peer) {
		// A substring of a short RemoteAddr may be the key itself; a
		// substring of a long one would keep all of it alive in the
		// caller's map of keys.
		return addrKey(peer, host, len(remote) <= 64), true
	}
	client := peer
	switch {
	case e.only == headerForwarded:
		e.walk(r, headerForwarded, lastForwardedHop, &client)
	case e.only == headerXForwardedFor:
		e.walk(r, headerXForwardedFor, lastXFFHop, &client)
	case e.only == "" && e.walk(r, headerForwarded, lastForwardedHop, &client):
	case e.only == "" && e.walk(r, headerXForwardedFor, lastXFFHop, &client):
	default:
		var buf [1]string
		if lines := headerLines(r, headerXRealIP, &buf); len(lines) == 1 {
			if a, ok := parseHostPort(trimOWS(lines[0])); ok {
				client = a
			}
		}
	}
	// A key from a header is always copied, never a substring of it, for the
	// same reason.
	return addrKey(client, "", false), true
}

// lastHopFunc cuts the last (rightmost) hop off one field line. It returns
// the rest of the line before the hop, the hop's address, whether the line
// holds more hops, and whether the hop was an address at all.
type lastHopFunc func(line string) (rest string, a netip.Addr, more, ok bool)

// walk reads the named header, cutting hops with lastHop. It reports false if
// the header is absent (every line empty); then client is unchanged.
// Otherwise client ends as the first untrusted hop from the right, or the
// last hop read before the chain ended or a hop was malformed.
func (e ipExtractor) walk(r Request, name string, lastHop lastHopFunc, client *netip.Addr) bool {
	var buf [1]string
	lines := headerLines(r, name, &buf)
	present := false
	for _, l := range lines {
		if l != "" {
			present = true
			break
		}
	}
	if !present {
		return false
	}
	for i := len(lines) - 1; i >= 0; i-- {
		line := lines[i]
		for {
			rest, a, more, ok := lastHop(line)
			if !ok {
				return true
			}
			*client = a
			if !e.isTrusted(a) {
				return true
			}
			if !more {
				break
			}
			line = rest
		}
	}
	return true
}

// headerLines returns the field lines of name: from Values when r has that
// method, else Header's value as a single line, kept in buf.
func headerLines(r Request, name string, buf *[1]string) []string {
	if v, ok := r.(valueser); ok {
		return v.Values(name)
	}
	buf[0] = r.Header(name)
	if buf[0] == "" {
		return nil
	}
	return buf[:]
}

// lastXFFHop cuts the last hop off an X-Forwarded-For line: addresses
// separated by commas, each optionally with a port. See [lastHopFunc].
func lastXFFHop(line string) (rest string, a netip.Addr, more, ok bool) {
	i := strings.LastIndexByte(line, ',')
	a, ok = parseHostPort(trimOWS(line[i+1:]))
	if i < 0 {
		return "", a, false, ok
	}
	return line[:i], a, true, ok
}

// splitRemoteAddr returns the host of a RemoteAddr: "ip:port", "[ipv6]:port",
// or a bare address.
func splitRemoteAddr(s string) (string, bool) {
	if s == "" {
		return "", false
	}
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", false
		}
		if rest := s[end+1:]; rest != "" && (rest[0] != ':' || !isPort(rest[1:])) {
			return "", false
		}
		return s[1:end], true
	}
	if i := strings.IndexByte(s, ':'); i >= 0 && strings.IndexByte(s[i+1:], ':') < 0 {
		// Exactly one colon: IPv4 with a port. (A bare IPv6 has several.)
		if !isPort(s[i+1:]) {
			return "", false
		}
		return s[:i], true
	}
	return s, true
}

// parseHostPort parses an address as proxies write it in X-Forwarded-For
// and X-Real-IP: bare, "ipv4:port", "[ipv6]" or "[ipv6]:port".
func parseHostPort(s string) (netip.Addr, bool) {
	host, ok := splitRemoteAddr(s)
	if !ok {
		return netip.Addr{}, false
	}
	if s[0] == '[' {
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() {
			return netip.Addr{}, false
		}
		return normalize(a), true
	}
	return parseAddr(host)
}

// parseAddr parses an IPv4 or IPv6 address and normalizes it.
func parseAddr(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return normalize(a), true
}

// normalize drops a's zone and unmaps an IPv4-mapped IPv6 address, so that
// a matches prefixes and makes one key however it was written.
func normalize(a netip.Addr) netip.Addr {
	return a.WithZone("").Unmap()
}

// addrKey returns the key of a: its text if IPv4, its /64 if IPv6. If reuse
// is set and src is that text already, src is returned and nothing is
// allocated.
func addrKey(a netip.Addr, src string, reuse bool) string {
	var buf [64]byte // the longest IPv6 text, 45 bytes, and "/64"
	var b []byte
	if a.Is4() {
		b = a.AppendTo(buf[:0])
	} else {
		p, _ := a.Prefix(ipv6Bits) // a has no zone: it cannot fail
		b = p.AppendTo(buf[:0])
	}
	if reuse && string(b) == src {
		return src
	}
	return string(b)
}

// isPort reports whether s is a decimal port: 1 to 5 digits.
func isPort(s string) bool {
	if len(s) == 0 || len(s) > 5 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// trimOWS removes the optional white space of HTTP, spaces and tabs, around s.
func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
