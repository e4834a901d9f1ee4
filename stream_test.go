package throttle

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/limiters"
)

// anthropicOverloaded is how Anthropic reports, inside a 200 stream, that
// it is overloaded: an error event after the message has started.
const anthropicOverloaded = "event: message_start\r\n" +
	`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[]}}` + "\r\n\r\n" +
	"event: ping\r\ndata: {\"type\": \"ping\"}\r\n\r\n" +
	"event: error\r\n" +
	`data: {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}` + "\r\n\r\n"

func sseResponse(body string) *http.Response {
	return &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": {"text/event-stream; charset=utf-8"}},
		Body:       io.NopCloser(strings.NewReader(body)),
	}
}

// TestStreamedOverloadedErrorPausesAsA529Does: an overloaded_error read
// from a 200 event stream pauses the partition exactly as a 529 answer
// does — a pause of the same kind (the pace's backoff, no Retry-After to
// go by), and the request after it waits it out. The two pauses are not
// equal to the nanosecond: the stream's 200 was counted as a success
// before its error event came, and the pace counts the successes of the
// cycle a refusal ends.
func TestStreamedOverloadedErrorPausesAsA529Does(t *testing.T) {
	run := func(t *testing.T, first func() *http.Response) (paused time.Duration, waited time.Duration) {
		var p pauses
		calls := 0
		tr := NewTransport(roundTripFunc(func(*http.Request) (*http.Response, error) {
			calls++
			if calls == 1 {
				return first(), nil
			}
			return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody}, nil
		}), WithObserver(p.observe))
		defer tr.Close()
		// A few successes first, so that the pace the refusal teaches
		// has a cycle to measure.
		for range 3 {
			calls = 1
			resp, err := tr.RoundTrip(mustReq(t, "http://llm.test/v1/messages", nil))
			require.NoError(t, err)
			resp.Body.Close()
			time.Sleep(100 * time.Millisecond)
		}
		calls = 0
		start := time.Now()
		resp, err := tr.RoundTrip(mustReq(t, "http://llm.test/v1/messages", nil))
		require.NoError(t, err)
		_, err = io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		ev := p.all()
		require.Len(t, ev, 1, "one pause")
		assert.Equal(t, 529, ev[0].Status)
		paused = ev[0].Until.Sub(start)

		resp, err = tr.RoundTrip(mustReq(t, "http://llm.test/v1/messages", nil))
		require.NoError(t, err)
		resp.Body.Close()
		return paused, time.Since(start)
	}
	synctest.Test(t, func(t *testing.T) {
		ssePause, sseWait := run(t, func() *http.Response { return sseResponse(anthropicOverloaded) })
		plainPause, plainWait := run(t, func() *http.Response {
			return &http.Response{
				StatusCode: 529,
				Header:     http.Header{"Content-Type": {"application/json"}},
				Body:       io.NopCloser(strings.NewReader(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)),
			}
		})
		assert.Positive(t, ssePause)
		assert.Positive(t, plainPause)
		assert.InDelta(t, 1, float64(ssePause)/float64(plainPause), 0.5, "a pause like a 529's: %v and %v", ssePause, plainPause)
		assert.GreaterOrEqual(t, sseWait, ssePause, "the next request waits it out")
		assert.GreaterOrEqual(t, plainWait, plainPause)
	})
}

// TestStreamedOverloadedErrorOverHTTP: a real event-stream server that
// breaks off with overloaded_error after some events; once the client has
// read the stream, its partition is paused (a request bounded by
// WithMaxWait fails at once with limiters.ErrRateLimited).
func TestStreamedOverloadedErrorOverHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		for i := range 3 {
			fmt.Fprintf(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"word %d\"}}\n\n", i)
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, "event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n")
	}))
	defer srv.Close()
	var p pauses
	tr := NewTransport(srv.Client().Transport, WithObserver(p.observe), WithMaxWait(time.Millisecond))
	defer tr.Close()
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}

	resp, err := c.Get(srv.URL)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Contains(t, string(body), "overloaded_error", "the body passes through unchanged")
	assert.Equal(t, 3, strings.Count(string(body), "content_block_delta\n"))
	ev := p.all()
	require.Len(t, ev, 1)
	assert.Equal(t, 529, ev[0].Status)
	assert.True(t, ev[0].Until.After(time.Now()))

	_, err = c.Get(srv.URL)
	require.Error(t, err)
	assert.ErrorIs(t, err, limiters.ErrRateLimited, "the partition is paused")
}

// TestOrdinaryEventStreamTeachesNothing: events without an error, and an
// error that is not about capacity, leave the partition alone.
func TestOrdinaryEventStreamTeachesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var p pauses
		body := "data: {\"choices\":[{\"delta\":{\"content\":\"an \\\"error\\\" in text\"}}]}\n\n" +
			"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\"}}\n\n" +
			"data: [DONE]\n\n"
		tr := NewTransport(roundTripFunc(func(*http.Request) (*http.Response, error) {
			return sseResponse(body), nil
		}), WithObserver(p.observe))
		defer tr.Close()
		for range 3 {
			resp, err := tr.RoundTrip(mustReq(t, "http://llm.test/", nil))
			require.NoError(t, err)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		assert.Empty(t, p.all())
	})
}

func TestSSEScanner(t *testing.T) {
	long := strings.Repeat("x", maxSSEField+10)
	for _, tc := range []struct {
		name   string
		in     string
		status int
	}{
		{"anthropic LF", "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n", 529},
		{"anthropic CR", "event: error\rdata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\r\r", 529},
		{"anthropic rate limit", "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\"}}\n\n", 429},
		{"openai chat", "data: {\"error\":{\"message\":\"slow down\",\"type\":\"requests\",\"code\":\"rate_limit_exceeded\"}}\n\n", 429},
		{"openai responses", "event: error\ndata: {\"type\":\"error\",\"code\":\"server_is_overloaded\",\"message\":\"busy\"}\n\n", 529},
		{"data split over lines", "event: error\ndata: {\"type\":\"error\",\ndata: \"error\":{\"type\":\"overloaded_error\"}}\n\n", 529},
		{"no blank line yet", "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\n", 0},
		{"comment", ": event: error\ndata: {\"type\":\"ping\"}\n\n", 0},
		{"not json", "event: error\ndata: overloaded_error\n\n", 0},
		{"other error", "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\"}}\n\n", 0},
		{"long line skipped", "data: " + long + "\nevent: error\ndata: {\"error\":{\"type\":\"overloaded_error\"}}\n\n", 529},
		{"long data dropped", "event: error\ndata: {\"error\":{\"type\":\"overloaded_error\"}}\ndata: " + long[:maxSSEField-100] + "\ndata: " + long[:200] + "\n\n", 0},
		{"event reset between events", "event: error\ndata: {\"type\":\"x\"}\n\ndata: {\"type\":\"message\",\"error\":null}\n\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, chunk := range []int{len(tc.in), 1, 7} {
				var s sseScanner
				status := 0
				in := []byte(tc.in)
				for len(in) > 0 && status == 0 {
					n := min(chunk, len(in))
					status, _ = s.feed(in[:n])
					in = in[n:]
				}
				assert.Equal(t, tc.status, status, "chunks of %d", chunk)
			}
		})
	}
}

// FuzzSSEScanner: any input, fed whole or in two pieces, reports the same
// thing and never panics.
func FuzzSSEScanner(f *testing.F) {
	f.Add([]byte(anthropicOverloaded), 10)
	f.Add([]byte("event: error\r\ndata: {\"error\":{\"code\":\"rate_limit_exceeded\"}}\r\n\r\n"), 3)
	f.Add([]byte("data: x\r\r\n\n:\n"), 1)
	f.Fuzz(func(t *testing.T, in []byte, cut int) {
		var whole sseScanner
		st1, d1 := whole.feed(in)
		if cut < 0 || cut > len(in) {
			cut = len(in) / 2
		}
		var split sseScanner
		st2, d2 := split.feed(in[:cut])
		if st2 == 0 {
			st2, d2 = split.feed(in[cut:])
		}
		if st1 != st2 || string(d1) != string(d2) {
			t.Fatalf("whole: %d %q; split at %d: %d %q", st1, d1, cut, st2, d2)
		}
		if st1 != 0 && st1 != 429 && st1 != 529 {
			t.Fatalf("status %d", st1)
		}
	})
}

func TestIsEventStream(t *testing.T) {
	for ct, want := range map[string]bool{
		"text/event-stream":                true,
		"text/event-stream; charset=utf-8": true,
		"Text/Event-Stream ;charset=utf-8": true,
		"text/event-streams":               false,
		"application/json":                 false,
		"":                                 false,
		"text/event":                       false,
	} {
		assert.Equal(t, want, isEventStream(ct), ct)
	}
}
