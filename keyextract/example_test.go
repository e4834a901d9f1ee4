package keyextract_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"

	"github.com/throttlekit/throttle/keyextract"
)

func ExampleHost() {
	r, _ := http.NewRequest(http.MethodGet, "https://API.example.com:8443/v1/items", nil)
	key, ok := keyextract.Host().Extract(keyextract.HTTP(r))
	fmt.Println(key, ok)
	// Output: api.example.com:8443 true
}

func ExampleIP() {
	// No trusted proxies: the peer is the client, whatever the headers say.
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "203.0.113.7:4711"
	r.Header.Set("X-Forwarded-For", "192.0.2.1")
	fmt.Println(keyextract.IP().Extract(keyextract.HTTP(r)))

	// IPv6 clients share a key per /64.
	r.RemoteAddr = "[2001:db8:1:2:a:b:c:d]:4711"
	fmt.Println(keyextract.IP().Extract(keyextract.HTTP(r)))
	// Output:
	// 203.0.113.7 true
	// 2001:db8:1:2::/64 true
}

func ExampleIP_trustedProxies() {
	ip := keyextract.IP(netip.MustParsePrefix("10.0.0.0/8"))

	// Our load balancer, 10.0.0.1, appended the address it saw; the client
	// sent a forged address to the left of it.
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.0.0.1:50000"
	r.Header.Set("X-Forwarded-For", "192.0.2.1, 198.51.100.5, 10.0.0.2")
	fmt.Println(ip.Extract(keyextract.HTTP(r)))

	// Forwarded (RFC 7239) is preferred to X-Forwarded-For.
	r.Header.Set("Forwarded", `for="[2001:db8:cafe::17]:4711";proto=https`)
	fmt.Println(ip.Extract(keyextract.HTTP(r)))

	// A client that connects directly cannot choose its key.
	r.RemoteAddr = "203.0.113.7:4711"
	fmt.Println(ip.Extract(keyextract.HTTP(r)))
	// Output:
	// 198.51.100.5 true
	// 2001:db8:cafe::/64 true
	// 203.0.113.7 true
}

func ExampleRoute() {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /items/{id}", func(w http.ResponseWriter, r *http.Request) {
		key, _ := keyextract.Route().Extract(keyextract.HTTP(r))
		fmt.Println(key)
	})
	mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/items/1", nil))
	mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/items/2", nil))
	// Output:
	// GET /items/{id}
	// GET /items/{id}
}

func ExampleHeader() {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("X-API-Key", "k-123")
	fmt.Println(keyextract.Header("x-api-key").Extract(keyextract.HTTP(r)))
	fmt.Println(keyextract.Header("X-Tenant").Extract(keyextract.HTTP(r)))
	// Output:
	// k-123 true
	//  false
}

func ExampleComposite() {
	perClientAndKey := keyextract.Composite("|",
		keyextract.IP(),
		keyextract.Header("X-API-Key"),
	)
	r := httptest.NewRequest(http.MethodGet, "/", nil) // RemoteAddr 192.0.2.1:1234
	r.Header.Set("X-API-Key", "k-123")
	fmt.Println(perClientAndKey.Extract(keyextract.HTTP(r)))

	r.Header.Del("X-API-Key")
	fmt.Println(perClientAndKey.Extract(keyextract.HTTP(r)))
	// Output:
	// 192.0.2.1|k-123 true
	//  false
}

func ExampleFunc() {
	byTenant := keyextract.Func(func(r keyextract.Request) (string, bool) {
		if t := r.Header("X-Tenant"); t != "" {
			return "tenant:" + t, true
		}
		return "anonymous", true
	})
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	fmt.Println(byTenant.Extract(keyextract.HTTP(r)))
	r.Header.Set("X-Tenant", "acme")
	fmt.Println(byTenant.Extract(keyextract.HTTP(r)))
	// Output:
	// anonymous true
	// tenant:acme true
}

func ExampleGlobal() {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	fmt.Println(keyextract.Global().Extract(keyextract.HTTP(r)))
	// Output: global true
}
