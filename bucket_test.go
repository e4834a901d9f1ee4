package throttle

import (
	"encoding/base64"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestRouteTable: a route table answers the same whether it holds its
// routes in a list or, past smallRoutes, in a map; re-pointing a route
// leaves the table it was copied from as it was.
func TestRouteTable(t *testing.T) {
	gates := make([]*gate, 3*smallRoutes)
	var tab *routeTable
	for i := range gates {
		gates[i] = &gate{key: strconv.Itoa(i)}
		tab = tab.with(route{"GET", "r" + strconv.Itoa(i), ""}, gates[i])
		if tab.len() != i+1 {
			t.Fatalf("after %d routes: len %d", i+1, tab.len())
		}
		for j := 0; j <= i; j++ {
			if g := tab.get(route{"GET", "r" + strconv.Itoa(j), ""}); g != gates[j] {
				t.Fatalf("with %d routes: route %d -> %v, want gate %d", i+1, j, g, j)
			}
		}
		if g := tab.get(route{"POST", "r0", ""}); g != nil {
			t.Fatalf("with %d routes: an unknown route -> %v", i+1, g)
		}
		if i+1 == smallRoutes || i+1 == len(gates) {
			moved := tab.with(route{"GET", "r0", ""}, gates[1])
			if moved.len() != tab.len() || moved.get(route{"GET", "r0", ""}) != gates[1] || tab.get(route{"GET", "r0", ""}) != gates[0] {
				t.Fatalf("with %d routes: re-pointing r0 changed the original or lost it", i+1)
			}
		}
	}
}

// TestBucketGates: a partition's gate lists the gates of the buckets its
// answers named, each once, named after its key; a bucket's gate lists
// none, though it links its siblings.
func TestBucketGates(t *testing.T) {
	g := &gate{key: "api.test"}
	core := g.bucket("core", route{"GET", "repos", "x"})
	search := g.bucket("search", route{"GET", "search", "issues"})
	if again := g.bucket("core", route{"GET", "users", "x"}); again != core {
		t.Fatalf("core named twice: two gates")
	}
	var names []string
	for b := range g.bucketGates {
		names = append(names, b.named())
	}
	if len(names) != 2 || names[0] != "search" || names[1] != "core" {
		t.Fatalf("bucket gates: %q", names)
	}
	if core.key != "api.test#core" || g.named() != "" || search.parent != g {
		t.Fatalf("keys and names: %q %q", core.key, g.named())
	}
	for b := range search.bucketGates {
		t.Fatalf("a bucket's gate lists %q", b.key)
	}
	for _, tc := range []struct {
		r       route
		want    *gate
		learned bool
	}{
		{route{"GET", "users", "x"}, core, true},
		{route{"GET", "search", "issues"}, search, true},
		{route{"GET", "repos", "x"}, core, true},
		// Not learned: guessed by method and first segment.
		{route{"GET", "search", "code"}, search, false},
		{route{"GET", "repos", "y"}, core, false},
		// Not learned, no family: two buckets, no guess.
		{route{"POST", "repos", "y"}, nil, false},
		{route{"GET", "graphql", ""}, nil, false},
	} {
		if b, learned := g.routed(tc.r); b != tc.want || learned != tc.learned {
			t.Errorf("routed(%v) = %v, %v; want %v, %v", tc.r, b, learned, tc.want, tc.learned)
		}
	}
	// A route learned to name no bucket goes through the partition's gate,
	// and so does its family.
	g.remember(route{"GET", "meta", ""}, g)
	if b, learned := g.routed(route{"GET", "meta", ""}); b != nil || !learned {
		t.Errorf("a route of no bucket: %v, %v", b, learned)
	}
	if b, _ := g.routed(route{"GET", "meta", "x"}); b != nil {
		t.Errorf("its family: %v", b)
	}
}

// TestRouteOf: the default route rule: method and the first two segments
// below an API prefix ("api", a version), one more below a Discord
// top-level resource.
func TestRouteOf(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		want         route
	}{
		{"GET", "/search/issues?q=x", route{"GET", "search", "issues"}},
		{"GET", "/repos/o/r/issues/1", route{"GET", "repos", "o"}},
		{"POST", "/graphql", route{"POST", "graphql", ""}},
		{"GET", "/", route{"GET", "", ""}},
		{"GET", "", route{"GET", "", ""}},
		// GitHub Enterprise Server, OpenAI, Anthropic.
		{"GET", "/api/v3/repos/o/r", route{"GET", "repos", "o"}},
		{"POST", "/v1/chat/completions", route{"POST", "chat", "completions"}},
		{"POST", "/v1/messages", route{"POST", "messages", ""}},
		// Not a prefix: nothing after it, or not a version.
		{"GET", "/api", route{"GET", "api", ""}},
		{"GET", "/api/", route{"GET", "api", ""}},
		{"GET", "/v1", route{"GET", "v1", ""}},
		{"GET", "/v1/", route{"GET", "v1", ""}},
		{"GET", "/version/x", route{"GET", "version", "x"}},
		{"GET", "/vx1/y", route{"GET", "vx1", "y"}},
		{"GET", "/api/users/1", route{"GET", "users", "1"}},
		// Discord: the top-level resource's id and what follows.
		{"POST", "/api/v10/channels/1234/messages", route{"POST", "channels", "1234/messages"}},
		{"PATCH", "/api/v10/channels/1234/messages/99", route{"PATCH", "channels", "1234/messages"}},
		{"PUT", "/api/channels/1234/typing", route{"PUT", "channels", "1234/typing"}},
		{"GET", "/api/v10/channels/1234", route{"GET", "channels", "1234"}},
		{"GET", "/api/v10/guilds/7/members", route{"GET", "guilds", "7/members"}},
		{"POST", "/api/v10/webhooks/5/tok", route{"POST", "webhooks", "5/tok"}},
		{"GET", "/api/v10/users/@me/guilds", route{"GET", "users", "@me"}},
	} {
		req := httptest.NewRequest(tc.method, "http://api.test"+tc.path, nil)
		if tc.path == "" {
			req.URL.Path = ""
		}
		if got := routeOf(req); got != tc.want {
			t.Errorf("routeOf(%s %s) = %q, want %q", tc.method, tc.path, got, tc.want)
		}
	}
}

// TestDiscordRoutesGuessTheirResourcesBucket: a route of a Discord
// bucket's family (POST /channels/*/messages) not learned yet goes
// through a gate of its own channel, under the same hash; a family's
// route elsewhere is guessed as any other.
func TestDiscordRoutesGuessTheirResourcesBucket(t *testing.T) {
	g := &gate{key: "discord.com"}
	c1 := g.bucket(discordName("h", "channels", "1"), route{"POST", "channels", "1/messages"})
	b, learned := g.routed(route{"POST", "channels", "2/messages"})
	if b == nil || b == c1 || b.named() != "h channels/2" || !learned {
		t.Fatalf("a new channel: %v, %v", b, learned)
	}
	if again, _ := g.routed(route{"POST", "channels", "2/messages"}); again != b {
		t.Fatalf("the new channel's gate made twice")
	}
	// Another family: not guessed.
	if b, _ := g.routed(route{"PUT", "channels", "2/typing"}); b != nil {
		t.Fatalf("another family: %v", b)
	}
	if b, ok := discordHash(c1, route{"POST", "channels", "1/messages"}); !ok || b != "h" {
		t.Fatalf("discordHash: %q, %v", b, ok)
	}
	for _, tc := range []struct {
		name, bucket, kind, id string
		want                   bool
	}{
		{"h channels/1", "h", "channels", "1", true},
		{"h", "h", "", "", true},
		{"h channels/12", "h", "channels", "1", false},
		{"h guilds/1", "h", "channels", "1", false},
		{"hx channels/1", "h", "channels", "1", false},
		{"h channels-1", "h", "channels", "1", false},
	} {
		if got := isDiscordName(tc.name, tc.bucket, tc.kind, tc.id); got != tc.want || got && discordName(tc.bucket, tc.kind, tc.id) != tc.name {
			t.Errorf("isDiscordName(%q, %q, %q, %q) = %v", tc.name, tc.bucket, tc.kind, tc.id, got)
		}
	}
}

// TestDiscordBucketsBounded: past maxBuckets, a Discord bucket's new
// top-level resources share its hash's gate.
func TestDiscordBucketsBounded(t *testing.T) {
	g := &gate{key: "discord.com"}
	for i := range maxBuckets {
		g.bucket(discordName("h", "channels", strconv.Itoa(i)), route{"POST", "channels", strconv.Itoa(i) + "/messages"})
	}
	b := g.bucket(discordName("h", "channels", "x"), route{"POST", "channels", "x/messages"})
	if b.named() != "h" {
		t.Fatalf("past maxBuckets: %q", b.named())
	}
	if again := g.bucket(discordName("h", "channels", "y"), route{"POST", "channels", "y/messages"}); again != b {
		t.Fatalf("a second channel past the bound: %q", again.named())
	}
}

// TestScoutHoldsANewFamilysFirstWave: a host that names a bucket for
// each path (an IETF pk), ten a second each. Once /a's bucket is known,
// twenty goroutines start on /b, a family not learned yet: its requests
// go through a scout's gate, which lets ten go and holds the rest until
// the ten are answered, then sends them on through /b's bucket, which
// the answers named and counted down; a goroutine whose answer came back
// first goes to /b's bucket at once, which counts the scout's requests
// still out as its own (storeWire). Through the partition's gate, which
// heard long ago, all twenty went and ten were refused.
func TestScoutHoldsANewFamilysFirstWave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type window struct {
			start time.Time
			n     int
		}
		var mu sync.Mutex
		windows := map[string]*window{}
		refused := map[string]int{}
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			name := strings.Split(r.URL.Path, "/")[1]
			pk := base64.StdEncoding.EncodeToString([]byte(name))
			mu.Lock()
			defer mu.Unlock()
			now := time.Now()
			win := windows[name]
			if win == nil || now.Sub(win.start) >= time.Second {
				win = &window{start: now}
				windows[name] = win
			}
			left := int(math.Ceil(win.start.Add(time.Second).Sub(now).Seconds()))
			w.Header().Set("RateLimit-Policy", fmt.Sprintf(`"%s";q=10;w=1;pk=:%s:`, name, pk))
			if win.n >= 10 {
				refused[name]++
				w.Header().Set("RateLimit", fmt.Sprintf(`"%s";r=0;t=%d;pk=:%s:`, name, left, pk))
				w.Header().Set("Retry-After", strconv.Itoa(left))
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			win.n++
			w.Header().Set("RateLimit", fmt.Sprintf(`"%s";r=%d;t=%d;pk=:%s:`, name, 10-win.n, left, pk))
		})
		tr := NewTransport(handlerTransport{h: h, latency: 10 * time.Millisecond})
		defer tr.Close()
		client := &http.Client{Transport: tr}
		run := func(path string, workers, total int) {
			var next atomic.Int64
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for next.Add(1) <= int64(total) {
						untilOK(t, client, func() *http.Request { return mustReq(t, "http://api.test/"+path+"/x", nil) })
					}
				})
			}
			wg.Wait()
		}
		run("a", 10, 30)
		start := time.Now()
		run("b", 20, 60)
		took := time.Since(start)
		t.Logf("%v, refused %v", took, refused)
		assert.Zero(t, refused["b"])
		assert.Less(t, took, 6*time.Second+500*time.Millisecond) // six windows of ten
		// The scout is no bucket of the server's.
		assert.Equal(t, 2, tr.Stats().Partitions-1, "partitions and buckets: a, b")
	})
}
