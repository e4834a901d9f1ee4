package keyextract

import (
	"net/http"
	"testing"
)

func BenchmarkExtract(b *testing.B) {
	trusted := IP(mustPrefixes("10.0.0.0/8", "2001:db8:ffff::/48")...)
	out, err := http.NewRequest(http.MethodGet, "https://api.example.com:8443/v1/items", nil)
	if err != nil {
		b.Fatal(err)
	}
	in := newInbound("203.0.113.7:4711", "X-Api-Key", "k-123")
	in.Pattern = "GET /"
	benches := []struct {
		name string
		e    Extractor
		r    *http.Request
	}{
		{"Global", Global(), in},
		{"Host", Host(), out},
		{"Route", Route(), in},
		{"Header", Header("X-Api-Key"), in},
		{"Composite", Composite("|", IP(), Header("X-Api-Key")), in},
		{"IP/ipv4-peer", IP(), in},
		{"IP/ipv6-peer", IP(), newInbound("[2001:db8:1:2::1]:4711")},
		{"IP/untrusted-peer-forged-XFF", trusted, newInbound("203.0.113.7:4711", "X-Forwarded-For", "1.1.1.1")},
		{"IP/XFF-3-hops", trusted, newInbound("10.0.0.1:1", "X-Forwarded-For", "1.1.1.1, 198.51.100.5, 10.0.0.2")},
		{"IP/Forwarded-3-hops", trusted, newInbound("10.0.0.1:1", "Forwarded", `for=1.1.1.1, for="[2001:db8::1]:4711";proto=https, for=10.0.0.2`)},
		{"IP/X-Real-IP", trusted, newInbound("10.0.0.1:1", "X-Real-Ip", "198.51.100.5")},
	}
	for _, bb := range benches {
		req := HTTP(bb.r)
		if _, ok := bb.e.Extract(req); !ok {
			b.Fatalf("%s: no key", bb.name)
		}
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					bb.e.Extract(req)
				}
			})
		})
	}
}

func BenchmarkHTTP(b *testing.B) {
	r := newInbound("203.0.113.7:4711")
	b.ReportAllocs()
	var sink Request
	for b.Loop() {
		sink = HTTP(r)
	}
	_ = sink
}
