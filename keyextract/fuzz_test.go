package keyextract

import (
	"net/netip"
	"testing"
)

// checkKey fails t unless key is a canonical IPv4 address or a canonical
// IPv6 /64 prefix.
func checkKey(t *testing.T, key string) {
	t.Helper()
	if a, err := netip.ParseAddr(key); err == nil {
		if !a.Is4() || a.String() != key {
			t.Fatalf("key %q: not a canonical IPv4 address", key)
		}
		return
	}
	p, err := netip.ParsePrefix(key)
	if err != nil || p.Bits() != ipv6Bits || !p.Addr().Is6() || p.Addr().Is4In6() ||
		p.Masked() != p || p.String() != key {
		t.Fatalf("key %q: neither an IPv4 address nor a canonical IPv6 /64", key)
	}
}

// fuzzIP checks the invariants of IP for one forwarding header: no panic; a
// key is valid; a peer that is not trusted is the key whatever the header
// says; a trusted peer always gives a key.
func fuzzIP(t *testing.T, name, remote, value string) {
	trusted := mustPrefixes("10.0.0.0/8", "2001:db8:ffff::/48")
	r := newInbound(remote, name, value)

	peerKey, peerOK := IP().Extract(HTTP(r))
	if peerOK {
		checkKey(t, peerKey)
	}
	key, ok := IP(trusted...).Extract(HTTP(r))
	if ok != peerOK {
		t.Fatalf("ok = %v with trusted proxies, %v without", ok, peerOK)
	}
	if !ok {
		if key != "" {
			t.Fatalf("ok = false with key %q", key)
		}
		return
	}
	checkKey(t, key)

	// The peer, as an independent parser reads it.
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return
	}
	peer := ap.Addr().WithZone("").Unmap()
	isTrusted := false
	for _, p := range trusted {
		isTrusted = isTrusted || p.Contains(peer)
	}
	want := peer.String()
	if peer.Is6() {
		want = netip.PrefixFrom(peer, ipv6Bits).Masked().String()
	}
	if peerKey != want {
		t.Fatalf("peer %q: key %q, want %q", remote, peerKey, want)
	}
	if !isTrusted && key != want {
		t.Fatalf("untrusted peer %q with %s %q: key %q, want the peer's %q", remote, name, value, key, want)
	}

	// A Request without Values reads the same single line.
	key2, ok2 := IP(trusted...).Extract(fakeRequest{remote: remote, header: r.Header})
	if key2 != key || ok2 != ok {
		t.Fatalf("Header path gives %q, %v; Values path %q, %v", key2, ok2, key, ok)
	}
}

func FuzzForwardedFor(f *testing.F) {
	for _, remote := range []string{"10.0.0.1:1", "203.0.113.7:4711", "[2001:db8:ffff::1]:1", "[2001:db8::1]:1", "[::ffff:10.0.0.1]:80"} {
		for _, v := range []string{
			"",
			"198.51.100.5",
			"1.1.1.1, 198.51.100.5, 10.0.0.2",
			"10.0.0.9, 10.0.0.3",
			"1.1.1.1, garbage, 10.0.0.2",
			"[2001:db8::5]:4711, 2001:db8:ffff::2",
			"::ffff:198.51.100.5,fe80::1%eth0",
			"198.51.100.5:80,, ",
		} {
			f.Add(remote, v)
		}
	}
	f.Fuzz(func(t *testing.T, remote, value string) {
		fuzzIP(t, xff, remote, value)
		fuzzIP(t, xri, remote, value)
	})
}

func FuzzForwarded(f *testing.F) {
	for _, remote := range []string{"10.0.0.1:1", "203.0.113.7:4711", "[2001:db8:ffff::1]:1", "[2001:db8::1]:1"} {
		for _, v := range []string{
			"for=198.51.100.5",
			`for="[2001:db8::1]:4711"`,
			`For="198.51.100.5:_p";proto=https;by=10.0.0.1, for=10.0.0.2`,
			"for=_hidden, for=unknown, for=10.0.0.3",
			`for="1.1.1.1, for=198.51.100.5`,
			`for=1.1.1.1, for=198.51.100.5;host="a,b\"c\\"`,
			"for=10.0.0.9; for=10.0.0.8",
			`for="[fe80::1%25eth0]", for="[::ffff:10.0.0.4]"`,
			";;, ,for=",
		} {
			f.Add(remote, v)
		}
	}
	f.Fuzz(func(t *testing.T, remote, value string) {
		fuzzIP(t, fwd, remote, value)
	})
}
