package keyextract

import (
	"net/netip"
	"strings"
)

// This file reads the Forwarded header of RFC 7239:
//
//	Forwarded         = 1#forwarded-element
//	forwarded-element = [ forwarded-pair ] *( ";" [ forwarded-pair ] )
//	forwarded-pair    = token "=" value
//	value             = token / quoted-string
//	node              = nodename [ ":" node-port ]
//	nodename          = IPv4address / "[" IPv6address "]" / "unknown" / obfnode
//
// Elements are read from the right, the end our own proxies append to, so a
// client's malformed text to the left (an unterminated quote, say) cannot
// change how the trusted elements to its right are read.

// lastForwardedHop cuts the last element off a Forwarded line and returns the
// address of its "for" parameter. An element with no "for", with two, or
// whose node is not an IP address ("unknown", "_hidden") is malformed. See
// [lastHopFunc].
func lastForwardedHop(line string) (rest string, a netip.Addr, more, ok bool) {
	rest, elem, more, ok := cutLastElement(line)
	if !ok {
		return "", netip.Addr{}, false, false
	}
	node, ok := forwardedFor(elem)
	if !ok {
		return "", netip.Addr{}, false, false
	}
	a, ok = parseNode(node)
	return rest, a, more, ok
}

// cutLastElement splits s at its last comma outside a quoted string. It
// returns false if a quoted string is not closed.
func cutLastElement(s string) (rest, elem string, more, ok bool) {
	for i := len(s) - 1; i >= 0; i-- {
		switch s[i] {
		case ',':
			return s[:i], s[i+1:], true, true
		case '"':
			if escaped(s, i) {
				return "", "", false, false
			}
			// Find the opening quote: the first unescaped one to the left.
			j := i - 1
			for j >= 0 && (s[j] != '"' || escaped(s, j)) {
				j--
			}
			if j < 0 {
				return "", "", false, false
			}
			i = j
		}
	}
	return "", s, false, true
}

// escaped reports whether s[i] is preceded by an odd number of backslashes,
// which makes it the second half of a quoted-pair.
func escaped(s string, i int) bool {
	n := 0
	for i--; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// forwardedFor returns the value of the one "for" parameter of a
// forwarded-element. Pairs are separated by ";" with optional white space
// around them. A value is a quoted string or a run of token characters; the
// latter may also hold ':', '[' and ']', which RFC 7239 requires to be quoted
// but some proxies do not. A quoted "for" value holding a backslash is
// malformed: no node needs one.
func forwardedFor(elem string) (string, bool) {
	var node string
	found := false
	i := 0
	for {
		for i < len(elem) && (elem[i] == ' ' || elem[i] == '\t') {
			i++
		}
		if i == len(elem) {
			break
		}
		if elem[i] == ';' { // empty pair
			i++
			continue
		}
		start := i
		for i < len(elem) && isTchar(elem[i]) {
			i++
		}
		name := elem[start:i]
		if name == "" || i == len(elem) || elem[i] != '=' {
			return "", false
		}
		i++
		var value string
		quotedPair := false
		if i < len(elem) && elem[i] == '"' {
			i++
			start = i
			for i < len(elem) && elem[i] != '"' {
				if elem[i] == '\\' {
					quotedPair = true
					i++
				}
				i++
			}
			if i >= len(elem) {
				return "", false
			}
			value = elem[start:i]
			i++ // the closing quote
		} else {
			start = i
			for i < len(elem) && (isTchar(elem[i]) || elem[i] == ':' || elem[i] == '[' || elem[i] == ']') {
				i++
			}
			value = elem[start:i]
			if value == "" {
				return "", false
			}
		}
		for i < len(elem) && (elem[i] == ' ' || elem[i] == '\t') {
			i++
		}
		if i < len(elem) && elem[i] != ';' {
			return "", false
		}
		if strings.EqualFold(name, "for") {
			if found || quotedPair {
				return "", false
			}
			node, found = value, true
		}
	}
	return node, found
}

// parseNode parses a node that is an IP address: "192.0.2.1",
// "192.0.2.1:4711", "[2001:db8::1]" or "[2001:db8::1]:4711". The port may be
// an obfuscated one ("_abc"). "unknown" and obfuscated names are not
// addresses.
func parseNode(node string) (netip.Addr, bool) {
	host, port := node, ""
	if strings.HasPrefix(node, "[") {
		end := strings.IndexByte(node, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		host, port = node[1:end], node[end+1:]
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() {
			return netip.Addr{}, false
		}
		if port != "" && (port[0] != ':' || !isNodePort(port[1:])) {
			return netip.Addr{}, false
		}
		return normalize(a), true
	}
	if i := strings.IndexByte(node, ':'); i >= 0 {
		host, port = node[:i], node[i+1:]
		if !isNodePort(port) {
			return netip.Addr{}, false
		}
	}
	a, err := netip.ParseAddr(host)
	if err != nil || !a.Is4() { // an IPv6 address must be bracketed
		return netip.Addr{}, false
	}
	return a, true
}

// isNodePort reports whether s is a node-port: 1 to 5 digits, or an
// obfuscated port, "_" followed by letters, digits, '.', '_' or '-'.
func isNodePort(s string) bool {
	if len(s) < 2 || s[0] != '_' {
		return isPort(s)
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// isTchar reports whether c may appear in an HTTP token (RFC 9110, 5.6.2).
func isTchar(c byte) bool {
	if isAlnum(c) {
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}
