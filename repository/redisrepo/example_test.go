package redisrepo_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle/internal/testutil/redistest"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository/redisrepo"
	"github.com/throttlekit/throttle/server"
)

// Two replicas sharing one limit of 3 per minute through Redis: together
// they admit 3. (It needs a Redis at REDIS_ADDR, so it is compiled, not
// run, by go test.)
func Example() {
	client := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer client.Close()
	spec := limiters.Spec{Algorithm: limiters.AlgSlidingLog, Limit: 3, Window: 60e9}
	a, err := redisrepo.New(client, spec, redisrepo.WithFailMode(redisrepo.FailLocal), redisrepo.WithReplicas(2))
	if err != nil {
		panic(err)
	}
	defer a.Close()
	b, _ := redisrepo.New(client, spec, redisrepo.WithFailMode(redisrepo.FailLocal), redisrepo.WithReplicas(2))
	defer b.Close()
	ctx := context.Background()
	for i, r := range []*redisrepo.Repository{a, b, a, b} {
		d, err := r.TryAcquire(ctx, "user-42", 1)
		fmt.Println(i, d.Allowed, d.Remaining, err)
	}
}

// TestExample runs Example against a real Redis, which go test cannot do
// for an Example without output, and checks what it prints (printed to the
// test's output, it would be stray lines in go test's).
func TestExample(t *testing.T) {
	s := redistest.Start(t)
	t.Setenv("REDIS_ADDR", s.Addr)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	Example()
	os.Stdout = stdout
	w.Close()
	out, _ := io.ReadAll(r)
	if want := "0 true 2 <nil>\n1 true 1 <nil>\n2 true 0 <nil>\n3 false 0 <nil>\n"; string(out) != want {
		t.Errorf("Example printed %q, want %q", out, want)
	}
}

// A policy file's limits in Redis: every replica that loads the same file
// with Storage shares each rule's counts. (It needs a Redis at REDIS_ADDR.)
func ExampleStorage() {
	client := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer client.Close()
	const file = `
plans:
  free:
    default:
      limits:
        - {algorithm: fixed_window, limit: 2, window: 1h}
        - {algorithm: concurrency, limit: 5}
`
	var replicas []http.Handler
	for range 2 {
		p, err := server.ParsePolicy([]byte(file), "yaml", server.WithStorage(redisrepo.Storage(client)))
		if err != nil {
			panic(err)
		}
		defer p.Close()
		replicas = append(replicas, server.New(nil, server.WithPolicy(p)).Middleware(http.NotFoundHandler()))
	}
	for i := range 3 {
		w := httptest.NewRecorder()
		replicas[i%2].ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		fmt.Println(w.Code)
	}
}

// Lease mode: each process decides locally within its share of a hot
// quota, renewed from Redis every 100ms. (It needs a Redis at REDIS_ADDR.)
func ExampleWithLeases() {
	client := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer client.Close()
	spec := limiters.Spec{Algorithm: limiters.AlgGCRA, Limit: 1000, Rate: limiters.PerSecond(50000)}
	repo, err := redisrepo.New(client, spec, redisrepo.WithLeases(100*time.Millisecond))
	if err != nil {
		panic(err)
	}
	defer repo.Close()
	// A new share starts empty: the first permit comes after one interval
	// of it; Acquire waits for it.
	if err := repo.Acquire(context.Background(), "api-key", 1); err != nil {
		panic(err)
	}
	// Decisions describe this process's share: alone, it has the whole
	// rate, and so the whole burst.
	d, _ := repo.Peek(context.Background(), "api-key")
	fmt.Println("burst of the share:", d.Limit)
}

// TestStorageExamples runs ExampleStorage and ExampleWithLeases against a
// real Redis, with their output checked here since they have none.
func TestStorageExamples(t *testing.T) {
	s := redistest.Start(t)
	t.Setenv("REDIS_ADDR", s.Addr)
	for name, f := range map[string]func(){"Storage": ExampleStorage, "WithLeases": ExampleWithLeases} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout := os.Stdout
		os.Stdout = w
		f()
		os.Stdout = stdout
		w.Close()
		out, _ := io.ReadAll(r)
		want := map[string]string{"Storage": "404\n404\n429\n", "WithLeases": "burst of the share: 1000\n"}[name]
		if string(out) != want {
			t.Errorf("%s printed %q, want %q", name, out, want)
		}
	}
}
