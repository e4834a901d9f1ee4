package apisim_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/throttlekit/throttle/internal/testutil/apisim"
)

// A client talks to a simulated OpenAI API through the in-memory
// Transport; inside a testing/synctest bubble the same code runs on fake
// time.
func ExampleOpenAI() {
	sim := apisim.NewOpenAI(apisim.OpenAIConfig{RequestsPerWindow: 60, TokensPerWindow: 1000, Window: time.Hour})
	client := &http.Client{Transport: &apisim.Transport{Handler: sim}}
	for range 3 {
		resp, err := client.Post("http://api.test/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"gpt-4o","max_tokens":400}`))
		if err != nil {
			panic(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, "remaining", resp.Header.Get("x-ratelimit-remaining-tokens"), "retry", resp.Header.Get("x-should-retry") == "true")
	}
	s := sim.Snapshot()
	fmt.Println("admitted", s.Admitted, "refused", s.Refused, "by tokens", s.ByKey["tokens"].Refused)
	// Output:
	// 200 remaining 600 retry false
	// 200 remaining 200 retry false
	// 429 remaining 200 retry true
	// admitted 2 refused 1 by tokens 1
}

// GitHub's search resource has its own bucket: exhausting it leaves core
// untouched.
func ExampleGitHub() {
	sim := apisim.NewGitHub(apisim.GitHubConfig{})
	client := &http.Client{Transport: &apisim.Transport{Handler: sim}}
	for _, path := range []string{"/search/code", "/repos/o/r"} {
		resp, err := client.Get("http://api.test" + path)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Println(resp.Header.Get("x-ratelimit-resource"), resp.Header.Get("x-ratelimit-limit"), resp.Header.Get("x-ratelimit-remaining"))
	}
	// Output:
	// search 30 29
	// core 5000 4999
}
