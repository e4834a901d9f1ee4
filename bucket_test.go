package throttle

import (
	"strconv"
	"testing"
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
