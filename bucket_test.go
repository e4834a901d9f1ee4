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
		gates[i] = &gate{name: strconv.Itoa(i)}
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
