// Command rtloop repeats one operation of the library N times, for
// instructions.sh to count the instructions one costs (callgrind) — a
// figure that, unlike ns/op, does not move with the load of a shared
// machine. It uses only API that every revision instructions.sh compares
// has.
//
//	rtloop transport|parse plain|github|openai|anthropic N
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/headers"
	"github.com/throttlekit/throttle/limiters"
)

// stub answers every request with a 200 and the same header.
type stub struct{ h http.Header }

func (s stub) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: s.h, Body: http.NoBody, Request: req}, nil
}

// header returns the response header of a set. "github" carries the
// fields BenchmarkTransportStub's githubHandler writes; the others are
// shaped like headers' BenchmarkParse fixtures (the same fields, other
// values): neither lives outside a _test file, so they are written again
// here.
func header(set string) (http.Header, error) {
	h := http.Header{"Content-Type": {"text/plain; charset=utf-8"}}
	in := time.Now().Add(time.Hour)
	switch set {
	case "plain":
	case "github":
		h.Set("Content-Length", "2")
		h.Set("X-RateLimit-Limit", "1000000000")
		h.Set("X-RateLimit-Remaining", "999999999")
		h.Set("X-RateLimit-Reset", strconv.FormatInt(in.Unix(), 10))
		h.Set("X-RateLimit-Used", "1")
		h.Set("X-RateLimit-Resource", "core")
	case "openai":
		h.Set("X-Ratelimit-Limit-Requests", "5000")
		h.Set("X-Ratelimit-Remaining-Requests", "4999")
		h.Set("X-Ratelimit-Reset-Requests", "12ms")
		h.Set("X-Ratelimit-Limit-Tokens", "2000000")
		h.Set("X-Ratelimit-Remaining-Tokens", "1999000")
		h.Set("X-Ratelimit-Reset-Tokens", "30ms")
	case "anthropic":
		reset := in.UTC().Format(time.RFC3339)
		for _, q := range []string{"requests", "tokens", "input-tokens", "output-tokens"} {
			h.Set("Anthropic-Ratelimit-"+q+"-Limit", "4000")
			h.Set("Anthropic-Ratelimit-"+q+"-Remaining", "3999")
			h.Set("Anthropic-Ratelimit-"+q+"-Reset", reset)
		}
	default:
		return nil, fmt.Errorf("unknown header set %q", set)
	}
	return h, nil
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: rtloop transport|parse plain|github|openai|anthropic N")
		os.Exit(2)
	}
	h, err := header(os.Args[2])
	n, nerr := strconv.Atoi(os.Args[3])
	if err != nil || nerr != nil {
		fmt.Fprintln(os.Stderr, "rtloop:", err, nerr)
		os.Exit(2)
	}
	switch os.Args[1] {
	case "parse":
		now := time.Now()
		k := 0
		for range n {
			k += len(headers.Parse(h, now).Quotas)
		}
		fmt.Println(k / n)
	case "transport":
		t := throttle.NewTransport(stub{h}, throttle.WithLimiter(limiters.NewTokenBucket(limiters.PerSecond(1e9), 1e9)))
		defer t.Close()
		req, _ := http.NewRequest(http.MethodGet, "http://api.example/", nil)
		for range n {
			resp, err := t.RoundTrip(req)
			if err != nil {
				fmt.Fprintln(os.Stderr, "rtloop:", err)
				os.Exit(1)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	default:
		fmt.Fprintln(os.Stderr, "rtloop: unknown operation", os.Args[1])
		os.Exit(2)
	}
}
