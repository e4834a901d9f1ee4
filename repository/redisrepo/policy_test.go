package redisrepo_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/internal/testutil/redistest"
	"github.com/throttlekit/throttle/keyextract"
	"github.com/throttlekit/throttle/repository/redisrepo"
	"github.com/throttlekit/throttle/server"
)

// policyFile has plans × endpoints × several limits × cost caps, with every
// window long enough that nothing refills while a test runs.
const policyFile = `
default_plan: free
plans:
  free:
    default:
      limits:
        - {algorithm: fixed_window, limit: 4, window: 1h}
    endpoints:
      "POST /api/ask":
        limits:
          - {algorithm: gcra, rate: 3/h, limit: 3}
          - {algorithm: fixed_window, limit: 5, window: 24h}
          - {algorithm: concurrency, limit: 2}
        cost_caps:
          - {algorithm: fixed_window, limit: 100, window: 1h}
          - {algorithm: sliding_window, limit: 150, window: 24h}
      "GET /items/{id}":
        limits:
          - {algorithm: token_bucket, rate: 2/h, limit: 2}
          - {algorithm: sliding_log, limit: 3, window: 1h}
  pro:
    default:
      limits:
        - {algorithm: leaky_bucket, rate: 10/h, limit: 6}
    endpoints:
      "POST /api/ask":
        problem: temporary-reduced-capacity
        limits:
          - {algorithm: gcra, rate: 10/h, limit: 6}
          - {algorithm: sliding_window, limit: 8, window: 1h}
        cost_caps:
          - {algorithm: token_bucket, rate: 500/h, limit: 500}
          - {algorithm: fixed_window, limit: 700, window: 24h}
`

// policyHandler serves policyFile with storage (nil: memory). The caller
// is X-API-Key, the plan X-Plan, the cost X-Cost; a handler given X-Charge
// charges that much more after the fact and reports ChargeCost's answer.
func policyHandler(t *testing.T, opts ...server.PolicyOption) http.Handler {
	t.Helper()
	header := func(name string) func(keyextract.Request) int {
		return func(r keyextract.Request) int { n, _ := strconv.Atoi(r.Header(name)); return n }
	}
	opts = append(opts, server.WithPlan(func(r keyextract.Request) string { return r.Header("X-Plan") }),
		server.WithCapCost(header("X-Cost")), server.WithChargeAfter())
	p, err := server.ParsePolicy([]byte(policyFile), "yaml", opts...)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return server.New(nil, server.WithKey(keyextract.Header("X-API-Key")), server.WithPolicy(p)).
		Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if c := r.Header.Get("X-Charge"); c != "" {
				n, _ := strconv.Atoi(c)
				d, err := server.ChargeCost(r.Context(), n)
				fmt.Fprintf(w, "charged %d: allowed=%v limit=%d remaining=%d err=%v\n", n, d.Allowed, d.Limit, d.Remaining, err)
			}
			fmt.Fprintln(w, "ok")
		}))
}

type policyRequest struct {
	method, path, key, plan, cost, charge string
}

// policyScript exercises every rule to and past its limits, cost caps
// charged before and after the handler, and calls without cost caps.
func policyScript() []policyRequest {
	var s []policyRequest
	for i := range 6 {
		s = append(s, policyRequest{"GET", "/", "alice", "", "", ""})
		s = append(s, policyRequest{"GET", "/items/" + strconv.Itoa(i), "alice", "free", "", ""})
		s = append(s, policyRequest{"POST", "/api/ask", "alice", "", strconv.Itoa(20 * i), strconv.Itoa(7 * i)})
		s = append(s, policyRequest{"POST", "/api/ask", "bob", "pro", strconv.Itoa(60 * i), strconv.Itoa(90 * i)})
		s = append(s, policyRequest{"GET", "/other", "bob", "pro", "", ""})
	}
	for range 8 {
		s = append(s, policyRequest{"POST", "/api/ask", "carol", "pro", "", "80"})
	}
	s = append(s, policyRequest{"POST", "/api/ask", "dave", "pro", "501", ""}, // more than a cap ever grants
		policyRequest{"POST", "/api/ask", "erin", "pro", "300", "150"},
		policyRequest{"POST", "/api/ask", "erin", "pro", "10", "100"}, // a charge beyond what is left
		policyRequest{"POST", "/api/ask", "erin", "pro", "1", ""},
		policyRequest{"GET", "/", "", "", "", ""}) // no key: the anonymous caller
	return s
}

// response is what a client sees of one answer.
type response struct {
	status int
	header http.Header
	body   string
}

// awayFromBoundary waits out the last two seconds of an hour, where the
// policy's windows (an hour or a day, aligned to the epoch) roll over, so
// that both runs of a script see the same windows.
func awayFromBoundary() {
	if left := time.Until(time.Now().Truncate(time.Hour).Add(time.Hour)); left < 2*time.Second {
		time.Sleep(left + 100*time.Millisecond)
	}
}

func run(h http.Handler, script []policyRequest) []response {
	out := make([]response, len(script))
	for i, q := range script {
		req := httptest.NewRequest(q.method, q.path, nil)
		for k, v := range map[string]string{"X-API-Key": q.key, "X-Plan": q.plan, "X-Cost": q.cost, "X-Charge": q.charge} {
			if v != "" {
				req.Header.Set(k, v)
			}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		out[i] = response{w.Code, w.Header(), w.Body.String()}
	}
	return out
}

// timing matches the fields that depend on when a request came: they may
// differ by a second of rounding between two runs.
var timing = regexp.MustCompile(`(t=|Retry-After: |Retry-After-Ms: |X-Ratelimit-Reset: |X-Ratelimit-Reset-After: |"retry_after":|retry after )(\d+)(?:\.\d+)?`)

// render is a response as text, its timing fields replaced by "#", and
// those fields' values. (Content-Length follows the body, so it is left
// out: the bodies are compared.)
func render(r response) (string, []int) {
	h := r.header.Clone()
	h.Del("Content-Length")
	var b strings.Builder
	fmt.Fprintf(&b, "%d\n", r.status)
	for _, k := range slices.Sorted(maps.Keys(h)) {
		fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(h[k], ", "))
	}
	b.WriteString(r.body)
	var vals []int
	text := timing.ReplaceAllStringFunc(b.String(), func(m string) string {
		sub := timing.FindStringSubmatch(m)
		v, _ := strconv.Atoi(sub[2])
		if sub[1] == "Retry-After-Ms: " {
			v /= 1000 // compared in seconds, as the others
		}
		vals = append(vals, v)
		return sub[1] + "#"
	})
	return text, vals
}

// TestPolicyOnRedis runs one request script through a policy file with its
// limits in memory and with them in Redis (redisrepo.Storage): every answer
// is the same, status, headers and problem+json body, byte for byte but for
// the timing fields, which agree within a second; post-response charges
// (server.ChargeCost) report the same.
func TestPolicyOnRedis(t *testing.T) {
	s := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer client.Close()
	script := policyScript()
	awayFromBoundary()
	mem := run(policyHandler(t), script)
	red := run(policyHandler(t, server.WithStorage(redisrepo.Storage(client))), script)
	statuses := map[int]int{}
	for i, q := range script {
		mt, mv := render(mem[i])
		rt, rv := render(red[i])
		require.Equal(t, mt, rt, "request %d %+v", i, q)
		for j := range mv {
			assert.InDelta(t, mv[j], rv[j], 1, "request %d %+v: timing field %d", i, q, j)
		}
		statuses[red[i].status]++
	}
	// The script meets every kind of answer.
	assert.Positive(t, statuses[200])
	assert.Positive(t, statuses[429])
	assert.Positive(t, statuses[503])
	// The limits live in Redis: under one namespace per set of limits.
	keys, err := client.Keys(context.Background(), "*").Result()
	require.NoError(t, err)
	sets := map[string]bool{}
	for _, k := range keys {
		sets[k[:strings.IndexByte(k, '{')]] = true
	}
	assert.Len(t, sets, 7, "%v", keys) // every rule's limits, and two rules' caps, hold state
}

// TestChargeCostOnRedis charges a cost cap in Redis after the handler ran:
// the charge is taken, a charge beyond what is left takes the rest and says
// so, and the next request is refused by the cap.
func TestChargeCostOnRedis(t *testing.T) {
	s := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer client.Close()
	h := policyHandler(t, server.WithStorage(redisrepo.Storage(client)))
	out := run(h, []policyRequest{
		{"POST", "/api/ask", "erin", "pro", "300", "150"},
		{"POST", "/api/ask", "erin", "pro", "10", "100"},
		{"POST", "/api/ask", "erin", "pro", "1", ""},
	})
	assert.Equal(t, "charged 150: allowed=true limit=500 remaining=50 err=<nil>\nok\n", out[0].body)
	assert.Equal(t, "charged 100: allowed=false limit=500 remaining=0 err=<nil>\nok\n", out[1].body)
	assert.Equal(t, http.StatusServiceUnavailable, out[2].status)
	assert.Contains(t, out[2].body, "cost cap of 500 exceeded by a request costing 1")
}

// TestStorageNamespaces: two rules with the same limits keep separate
// counts in Redis, and a second policy loaded from the same file (another
// replica) shares them.
func TestStorageNamespaces(t *testing.T) {
	s := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer client.Close()
	const file = `
plans:
  p:
    endpoints:
      "/a": {limits: [{algorithm: fixed_window, limit: 2, window: 1h}]}
      "/b": {limits: [{algorithm: fixed_window, limit: 2, window: 1h}]}
`
	replica := func() http.Handler {
		p, err := server.ParsePolicy([]byte(file), "yaml", server.WithStorage(redisrepo.Storage(client)))
		require.NoError(t, err)
		t.Cleanup(func() { p.Close() })
		return server.New(nil, server.WithKey(keyextract.Header("X-API-Key")), server.WithPolicy(p)).Middleware(http.NotFoundHandler())
	}
	one, two := replica(), replica()
	var got []int
	for _, step := range []struct {
		h    http.Handler
		path string
	}{{one, "/a"}, {two, "/a"}, {one, "/a"}, {two, "/b"}, {one, "/b"}, {two, "/b"}} {
		got = append(got, run(step.h, []policyRequest{{"GET", step.path, "k", "", "", ""}})[0].status)
	}
	assert.Equal(t, []int{404, 404, 429, 404, 404, 429}, got)
}
