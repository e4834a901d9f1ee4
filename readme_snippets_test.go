//lint:file-ignore SA4006 the snippets are the documents' own, which skip error checks for brevity

package throttle_test

// The Go snippets of README.md and docs/recipes.md, verbatim, inside
// functions that give them their free variables, so that the compiler
// checks them. They are compiled, never run (they call real APIs and
// Redis). TestDocSnippets checks that each snippet is here.

import (
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/keyextract"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
	"github.com/throttlekit/throttle/repository/ratelimitd"
	"github.com/throttlekit/throttle/repository/redisrepo"
	"github.com/throttlekit/throttle/server"
)

func readmeQuickstart() {
	tr := throttle.NewTransport(nil, // nil: http.DefaultTransport
		throttle.WithLimiter(limiters.NewTokenBucket(limiters.PerSecond(10), 10)), // our own ceiling
		throttle.WithMaxWait(30*time.Second),                                      // fail fast past this, with *limiters.RejectedError
	)
	defer tr.Close()
	client := &http.Client{Transport: tr} // share it between goroutines: they queue fairly
	resp, err := client.Get("https://api.github.com/rate_limit")
	_, _ = resp, err
}

func readmeMetered(ctx context.Context, client *http.Client, url string, body io.Reader, promptTokens, maxTokens int64) {
	ctx = throttle.WithCost(ctx, "tokens", promptTokens+maxTokens) // the server's quota name
	ctx = throttle.WithPriority(ctx, 10)                           // before queued batch work
	req, _ := http.NewRequestWithContext(ctx, "POST", url, body)
	resp, err := client.Do(req) // *throttle.ExceedsQuotaError at once if it can never fit
	_, _ = resp, err
}

func readmeServer(mux http.Handler) {
	repo := repository.NewGCRA(limiters.PerSecond(20), 40, repository.WithMaxKeys(1_000_000))
	rl := server.New(repo) // key: client IP; headers: X-RateLimit-* and IETF RateLimit; 429 + problem+json
	log.Fatal(http.ListenAndServe(":8080", rl.Middleware(mux)))
}

func readmeReplicas() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"}) // or redis.NewClusterClient, a failover client
	repo, err := redisrepo.New(client, limiters.Spec{Algorithm: "gcra", Limit: 40, Rate: limiters.PerSecond(20)})
	rl := server.New(repo) // or throttle.WithRepository(repo) on the client side
	_, _ = rl, err
}

func readmePolicy(client *redis.Client) {
	p, err := server.LoadPolicy("policy.yaml")                                               // memory
	p, err = server.LoadPolicy("policy.yaml", server.WithStorage(redisrepo.Storage(client))) // or Redis
	rl := server.New(nil, server.WithPolicy(p))
	_, _ = rl, err
}

func readmeFleet() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	fs := redisrepo.NewFeedbackStore(client) // close it when done
	tr := throttle.NewTransport(nil, throttle.WithFeedbackStore(fs), throttle.WithKey(keyextract.Header("X-API-Key")))
	_ = tr
}

func recipeGitHub(token string, query io.Reader) {
	tr := throttle.NewTransport(nil,
		throttle.WithMaxWait(time.Minute),   // past it: *limiters.RejectedError at once
		throttle.WithLogger(slog.Default()), // pauses, and WithCost names GitHub never reported
	)
	defer tr.Close()
	gh := &http.Client{Transport: tr}

	req, err := http.NewRequest("GET", "https://api.github.com/repos/golang/go", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := gh.Do(req) // spends 1 of "core"

	ctx := throttle.WithCost(context.Background(), "graphql", 5) // the query's points
	req, err = http.NewRequestWithContext(ctx, "POST", "https://api.github.com/graphql", query)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = gh.Do(req)
	_, _ = resp, err
}

func recipeOpenAI(apiKey string, body io.Reader, promptTokens, maxTokens int) {
	rc := throttle.NewRetryableClient(nil, throttle.WithMaxWait(2*time.Minute))
	client := rc.StandardClient()

	ctx := throttle.WithCost(context.Background(), "tokens", int64(promptTokens+maxTokens))
	req, err := http.NewRequestWithContext(ctx, "POST", "https://api.openai.com/v1/chat/completions", body)
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := client.Do(req)
	var big *throttle.ExceedsQuotaError
	if errors.As(err, &big) {
		// more tokens than the quota's limit: it can never be sent
	}
	_ = resp
}

func recipeModels(req *http.Request, model string) {
	base := http.DefaultTransport
	clients := map[string]*http.Client{}
	for _, model := range []string{"gpt-4o", "gpt-4o-mini"} {
		clients[model] = &http.Client{Transport: throttle.NewTransport(base)}
	}
	resp, err := clients[model].Do(req)
	_, _ = resp, err
}

func recipeAnthropic(client *http.Client, apiKey string, body io.Reader, inputTokens, maxTokens int) {
	ctx := throttle.WithCost(context.Background(), "input-tokens", int64(inputTokens))
	ctx = throttle.WithCost(ctx, "output-tokens", int64(maxTokens))
	req, err := http.NewRequestWithContext(ctx, "POST", "https://api.anthropic.com/v1/messages", body)
	req.Header.Set("x-api-key", apiKey)
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := client.Do(req) // an overloaded 529 teaches a pace; it is not an error
	_, _ = resp, err
}

func recipePolicyServer(plans map[string]string, maxTokensOf func(keyextract.Request) int, mux http.Handler) {
	p, err := server.LoadPolicy("policy.yaml",
		server.WithPlan(func(r keyextract.Request) string { return plans[r.Header("X-API-Key")] }), // "" → default_plan
		server.WithCapCost(func(r keyextract.Request) int { return maxTokensOf(r) }),
	)
	if err != nil {
		log.Fatal(err) // the file's line and column, and the field: nothing is half loaded
	}
	defer p.Close()
	rl := server.New(nil, server.WithPolicy(p), server.WithKey(keyextract.Header("X-API-Key")))
	log.Fatal(http.ListenAndServe(":8080", rl.Middleware(mux)))
}

func recipeFleet() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"}) // or a Cluster or failover client
	defer client.Close()

	// Servers: the same policy file, its counts in Redis, shared by every replica.
	p, err := server.LoadPolicy("policy.yaml", server.WithStorage(redisrepo.Storage(client)))

	// Clients: one quota of 20 a second for the whole fleet, and one pause when the API says stop.
	repo, err := redisrepo.New(client, limiters.Spec{Algorithm: "gcra", Limit: 20, Rate: limiters.PerSecond(20)},
		redisrepo.WithFailMode(redisrepo.FailLocal), redisrepo.WithReplicas(4)) // Redis down: 5/s each
	fs := redisrepo.NewFeedbackStore(client)
	defer fs.Close()
	tr := throttle.NewTransport(nil, throttle.WithRepository(repo), throttle.WithFeedbackStore(fs))
	defer tr.Close()
	_, _ = p, err
}

func recipeService(ctx context.Context) {
	svc, err := ratelimitd.New("http://127.0.0.1:8090", ratelimitd.WithEndpoint("POST /api/ask"), ratelimitd.WithPlan("free"))
	if err != nil {
		log.Fatal(err)
	}
	defer svc.Close()
	rl := server.New(svc) // the middleware, its limits kept in the service
	d, err := svc.TryAcquire(ctx, "alice", 1)
	_, _, _ = rl, d, err
}

// The snippets are compiled; these keep the linters from calling the
// functions unused.
var _ = []any{readmeQuickstart, readmeMetered, readmeServer, readmeReplicas, readmePolicy, readmeFleet,
	recipeGitHub, recipeOpenAI, recipeModels, recipeAnthropic, recipePolicyServer, recipeFleet, recipeService}
