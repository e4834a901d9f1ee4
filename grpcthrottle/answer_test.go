package grpcthrottle

import (
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/throttlekit/throttle/headers"
)

func withDetails(code codes.Code, ds ...protoadapt.MessageV1) error {
	st, err := status.New(code, "refused").WithDetails(ds...)
	if err != nil {
		panic(err)
	}
	return st.Err()
}

func retryInfo(d time.Duration) *errdetails.RetryInfo {
	return &errdetails.RetryInfo{RetryDelay: durationpb.New(d)}
}

func TestAnswer(t *testing.T) {
	quota := &errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{Subject: "project:123", Description: "reads per minute"}}}
	for _, tc := range []struct {
		name     string
		err      error
		trailer  metadata.MD
		header   metadata.MD
		status   int // 0: no answer, the error
		wait     string
		violated []string
	}{
		{name: "ok", status: 200},
		{name: "ok with quota metadata", header: metadata.Pairs("x-ratelimit-limit", "10", "x-ratelimit-remaining", "3", "x-ratelimit-reset", "5"), status: 200},
		{name: "retry info", err: withDetails(codes.ResourceExhausted, retryInfo(1500*time.Millisecond)), status: 429, wait: "1500"},
		{name: "retry info rounded up", err: withDetails(codes.ResourceExhausted, retryInfo(1500*time.Microsecond)), status: 429, wait: "2"},
		{name: "unavailable with retry info", err: withDetails(codes.Unavailable, retryInfo(time.Second)), status: 503, wait: "1000"},
		{name: "unavailable bare", err: status.Error(codes.Unavailable, "connection refused")},
		{name: "pushback", err: status.Error(codes.ResourceExhausted, "slow down"), trailer: metadata.Pairs(pushbackKey, "250"), status: 429, wait: "250"},
		{name: "pushback and retry info: the longer", err: withDetails(codes.ResourceExhausted, retryInfo(100*time.Millisecond)), trailer: metadata.Pairs(pushbackKey, "250"), status: 429, wait: "250"},
		{name: "negative pushback ignored", err: status.Error(codes.ResourceExhausted, "no"), trailer: metadata.Pairs(pushbackKey, "-1"), status: 429},
		{name: "garbage pushback ignored", err: status.Error(codes.ResourceExhausted, "no"), trailer: metadata.Pairs(pushbackKey, "soon"), status: 429},
		{name: "negative retry info ignored", err: withDetails(codes.ResourceExhausted, retryInfo(-time.Second)), status: 429},
		{name: "quota failure", err: withDetails(codes.ResourceExhausted, quota, retryInfo(2*time.Second)), status: 429, wait: "2000", violated: []string{"project:123"}},
		{name: "other code", err: status.Error(codes.NotFound, "no such thing"), status: 404},
		{name: "no status", err: errors.New("dial tcp: refused")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := answer(tc.err, tc.header, tc.trailer)
			if tc.status == 0 {
				assert.Nil(t, resp)
				assert.Same(t, tc.err, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.status, resp.StatusCode)
			assert.Equal(t, tc.wait, resp.Header.Get("Retry-After-Ms"))
			assert.Empty(t, resp.Header.Get(pushbackKey), "gRPC's own keys are not fields")
			if tc.wait != "" {
				info := headers.Parse(resp.Header, time.Now())
				assert.True(t, info.HasRetryAfter, "headers.Parse reads it")
			}
			if tc.header != nil {
				assert.Len(t, headers.Parse(resp.Header, time.Now()).Quotas, 1)
			}
			c := headers.Classify(resp.StatusCode, resp.Header, headers.PeekBody(resp))
			assert.Equal(t, tc.violated, c.ViolatedPolicies)
			if tc.violated != nil {
				assert.Equal(t, headers.RateLimited, c.Signal)
				b, _ := io.ReadAll(resp.Body)
				assert.Contains(t, string(b), "project:123")
			}
			_ = http.StatusOK
		})
	}
}

// FuzzAnswer: any pushback trailer and RetryInfo give no panic, and a
// wait, when there is one, that headers.Parse reads as a Retry-After
// within a year.
func FuzzAnswer(f *testing.F) {
	f.Add(int32(8), int64(1), int32(500), "250")
	f.Add(int32(14), int64(-1), int32(-5), "-1")
	f.Add(int32(14), int64(1<<62), int32(999999999), "99999999999999999999")
	f.Fuzz(func(t *testing.T, code int32, secs int64, nanos int32, pushback string) {
		c := codes.Code(uint32(code) % 17)
		if c == codes.OK {
			c = codes.ResourceExhausted // an OK status has no details
		}
		st, err := status.New(c, "x").WithDetails(&errdetails.RetryInfo{RetryDelay: &durationpb.Duration{Seconds: secs, Nanos: nanos}})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := answer(st.Err(), nil, metadata.MD{pushbackKey: {pushback}})
		if resp == nil {
			if err == nil {
				t.Fatal("neither an answer nor an error")
			}
			return
		}
		if v := resp.Header.Get("Retry-After-Ms"); v != "" {
			// Read, or beyond the year headers.Parse reads (the
			// Transport then pauses for its WithMaxPause).
			if info := headers.Parse(resp.Header, time.Now()); info.RetryAfter < 0 || (!info.HasRetryAfter && len(v) < 11) {
				t.Fatalf("Retry-After-Ms %q read as %+v", v, info)
			}
		}
	})
}
