package server

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttle/keyextract"
)

// randPrefix is a random prefix: IPv4 of 8 to 32 bits, or IPv6 of 16 to
// 128, drawn from a small address space so that lists and clients meet.
func randPrefix(rng *rand.Rand) netip.Prefix {
	if rng.IntN(2) == 0 {
		a := netip.AddrFrom4([4]byte{10, byte(rng.IntN(4)), byte(rng.IntN(256)), byte(rng.IntN(256))})
		return netip.PrefixFrom(a, 8+rng.IntN(25)).Masked()
	}
	var b [16]byte
	b[0], b[1], b[2], b[7], b[15] = 0x20, 0x01, byte(rng.IntN(4)), byte(rng.IntN(256)), byte(rng.IntN(256))
	return netip.PrefixFrom(netip.AddrFrom16(b), 16+rng.IntN(113)).Masked()
}

// TestPrefixTableMatchesTheScan: the tables decide as the linear scans
// they replace: blocked if a prefix overlaps the client's, allowed if a
// prefix holds all of it.
func TestPrefixTableMatchesTheScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for round := range 50 {
		var pt prefixTable
		var list []netip.Prefix
		for range rng.IntN(40) {
			pf := randPrefix(rng)
			pt.add(pf)
			list = append(list, pf)
		}
		for range 200 {
			c := randPrefix(rng)
			if rng.IntN(2) == 0 { // a client address, or an IPv6 /64
				c = netip.PrefixFrom(c.Addr(), c.Addr().BitLen())
			} else if c.Addr().Is6() {
				c = netip.PrefixFrom(c.Addr(), 64).Masked()
			}
			overlaps, holds := false, false
			for _, pf := range list {
				overlaps = overlaps || pf.Overlaps(c)
				holds = holds || pf.Bits() <= c.Bits() && pf.Contains(c.Addr())
			}
			if got := pt.overlaps(c); got != overlaps {
				t.Fatalf("round %d: %v overlaps %v: table %v, scan %v", round, list, c, got, overlaps)
			}
			if got := pt.holds(c); got != holds {
				t.Fatalf("round %d: %v holds %v: table %v, scan %v", round, list, c, got, holds)
			}
		}
	}
}

// listOf is a block list of n random IPv4 prefixes (/16 to /32, outside
// 192.0.2.0/24) and one that blocks 198.51.100.0/24.
func listOf(n int) PrefixSource {
	return func(add func(netip.Prefix)) error {
		rng := rand.New(rand.NewPCG(uint64(n), 1))
		add(netip.MustParsePrefix("198.51.100.0/24"))
		for range n - 1 {
			u := rng.Uint32()
			a := netip.AddrFrom4([4]byte{byte(u >> 24), byte(u >> 16), byte(u >> 8), byte(u)})
			if a.As4()[0] == 192 || a.As4()[0] == 198 {
				continue
			}
			add(netip.PrefixFrom(a, 16+rng.IntN(17)).Masked())
		}
		return nil
	}
}

func listPolicy(tb testing.TB, n int) *Policy {
	p, err := NewPolicy(PolicyConfig{Plans: map[string]Plan{"only": {}}}, WithBlockList(listOf(n)))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close() })
	return p
}

// BenchmarkListed: what deciding a client against a block list costs, by
// the list's length (issue 21: 10,000 prefixes at most 3× one), for a
// client it lets pass and one it blocks.
func BenchmarkListed(b *testing.B) {
	for _, n := range []int{1, 10_000, 1_000_000} {
		p := listPolicy(b, n)
		for _, c := range []struct{ name, addr string }{{"pass", "192.0.2.1:1"}, {"blocked", "198.51.100.7:1"}} {
			req, _ := http.NewRequest(http.MethodGet, "http://api.test/", nil)
			req.RemoteAddr = c.addr
			r := keyextract.HTTP(req)
			want := c.name == "blocked"
			b.Run(fmt.Sprintf("n=%d/%s", n, c.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, blocked := p.listed(r); blocked != want {
						b.Fatal("wrong decision")
					}
				}
			})
		}
	}
}

// TestMillionPrefixesLoad: a block file of 10^6 prefixes loads (issue 21:
// in under 2 s; here the bound is generous, for a loaded machine or the
// race detector) and decides.
func TestMillionPrefixesLoad(t *testing.T) {
	n := 1_000_000
	if raceEnabled {
		n = 200_000
	}
	var sb strings.Builder
	sb.WriteString("# a million prefixes\n198.51.100.0/24\n")
	rng := rand.New(rand.NewPCG(7, 8))
	for sb.Len() > 0 && n > 1 {
		u := rng.Uint32()
		if byte(u>>24) == 192 || byte(u>>24) == 198 {
			continue
		}
		fmt.Fprintf(&sb, "%d.%d.%d.%d/%d\n", byte(u>>24), byte(u>>16), byte(u>>8), byte(u), 16+rng.IntN(17))
		n--
	}
	path := t.TempDir() + "/block.txt"
	if err := writeFile(path, sb.String()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p, err := NewPolicy(PolicyConfig{Plans: map[string]Plan{"only": {}}, BlockFile: path})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	t.Logf("%d prefixes loaded in %v", p.block.t.Size(), took)
	if took > 30*time.Second {
		t.Errorf("loading took %v", took)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://api.test/", nil)
	req.RemoteAddr = "198.51.100.7:1"
	if _, blocked := p.listed(keyextract.HTTP(req)); !blocked {
		t.Error("the listed prefix does not block")
	}
	req.RemoteAddr = "192.0.2.1:1"
	if _, blocked := p.listed(keyextract.HTTP(req)); blocked {
		t.Error("an address outside the list is blocked")
	}
}
