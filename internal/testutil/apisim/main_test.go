package apisim

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// reply is what a test keeps of a response.
type reply struct {
	status int
	header http.Header
	body   string
}

// send makes one request through rt to path with body ("" for none) and the
// given header pairs, and reads the whole response. It reports failures
// with t.Error, so goroutines may call it; a failed exchange returns the
// zero reply.
func send(t *testing.T, rt http.RoundTripper, method, path, body string, hdr ...string) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, "http://api.test"+path, rd)
	if err != nil {
		t.Error(err)
		return reply{}
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Error(err)
		return reply{}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Error(err)
	}
	return reply{resp.StatusCode, resp.Header, string(b)}
}

// assertHeaders checks each named field of h against its exact value.
func assertHeaders(t *testing.T, h http.Header, want map[string]string) {
	t.Helper()
	for name, v := range want {
		if got := h.Get(name); got != v {
			t.Errorf("%s = %q, want %q", name, got, v)
		}
	}
}
