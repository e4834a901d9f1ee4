package grpcthrottle

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// pushbackKey is the trailer by which a gRPC server asks the client to
// wait before retrying (gRFC A6): milliseconds, or a negative value or
// garbage for "do not retry".
const pushbackKey = "grpc-retry-pushback-ms"

// answer is what a call's outcome says, as the HTTP answer the Transport
// reads: OK is 200; RESOURCE_EXHAUSTED a 429 and UNAVAILABLE with a wait
// a 503, with Retry-After-Ms from google.rpc.RetryInfo or the pushback
// trailer (the longer of the two), and, for a QuotaFailure, a problem
// details body of type quota-exceeded naming the quotas (its
// violated-policies); any other code the status HTTP gives it. The
// header and trailer metadata, but for binary and reserved keys, are its
// header: rate-limit fields a server sends as metadata (x-ratelimit-*,
// RateLimit, ...) are read as they would be over HTTP. An error that
// carries no status (the call never reached a server: a connection
// failure), and UNAVAILABLE without a wait, teach nothing: they come back
// as the error, as a connection failure does from an HTTP transport.
func answer(err error, hdr, trl metadata.MD) (*http.Response, error) {
	h := http.Header{}
	copyMD(h, hdr)
	copyMD(h, trl)
	if err == nil {
		return &http.Response{StatusCode: http.StatusOK, Header: h, Body: http.NoBody}, nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return nil, err
	}
	wait, hasWait := time.Duration(0), false
	var quotas []string
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			if rd := d.GetRetryDelay(); rd != nil && rd.CheckValid() == nil && rd.AsDuration() >= 0 {
				wait, hasWait = max(wait, rd.AsDuration()), true
			}
		case *errdetails.QuotaFailure:
			for _, v := range d.GetViolations() {
				if q := quotaName(v); q != "" {
					quotas = append(quotas, q)
				}
			}
		}
	}
	if vs := trl.Get(pushbackKey); len(vs) > 0 {
		if ms, err := strconv.ParseInt(strings.TrimSpace(vs[0]), 10, 64); err == nil && ms >= 0 && ms <= maxPushbackMs {
			wait, hasWait = max(wait, time.Duration(ms)*time.Millisecond), true
		}
	}
	code := st.Code()
	if code == codes.Unavailable && !hasWait {
		return nil, err
	}
	resp := &http.Response{StatusCode: httpStatus(code), Header: h, Body: http.NoBody}
	if hasWait && (code == codes.ResourceExhausted || code == codes.Unavailable) {
		h.Set("Retry-After-Ms", strconv.FormatInt(ceilMs(wait), 10))
	}
	if len(quotas) > 0 && code == codes.ResourceExhausted {
		body, _ := json.Marshal(problem{
			Type:     "https://iana.org/assignments/http-problem-types#quota-exceeded",
			Status:   http.StatusTooManyRequests,
			Detail:   st.Message(),
			Violated: quotas,
		})
		h.Set("Content-Type", "application/problem+json")
		resp.Body = io.NopCloser(strings.NewReader(string(body)))
		resp.ContentLength = int64(len(body))
	}
	return resp, nil
}

// maxPushbackMs bounds a pushback: a year, as headers.Parse bounds a
// Retry-After (beyond it, the value overflows or is garbage).
const maxPushbackMs = 366 * 24 * 3600 * 1000

// problem is the RFC 9457 body a QuotaFailure is told as.
type problem struct {
	Type     string   `json:"type"`
	Status   int      `json:"status"`
	Detail   string   `json:"detail,omitempty"`
	Violated []string `json:"violated-policies"`
}

// quotaName names a QuotaFailure's violation: its subject ("project:123",
// "clientip:1.2.3.4") or, without one, its description.
func quotaName(v *errdetails.QuotaFailure_Violation) string {
	if s := v.GetSubject(); s != "" {
		return s
	}
	if m := v.GetQuotaMetric(); m != "" {
		return m
	}
	return v.GetDescription()
}

func ceilMs(d time.Duration) int64 {
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond > 0 {
		ms++
	}
	return ms
}

// copyMD adds md's text keys to h; binary keys (-bin) and gRPC's own
// (grpc-*, :authority, content-type) are left out.
func copyMD(h http.Header, md metadata.MD) {
	for k, vs := range md {
		if strings.HasSuffix(k, "-bin") || strings.HasPrefix(k, "grpc-") || strings.HasPrefix(k, ":") || k == "content-type" {
			continue
		}
		ck := http.CanonicalHeaderKey(k)
		h[ck] = append(h[ck], vs...)
	}
}

// httpStatus is the HTTP status of a gRPC code, as the gRPC-HTTP mapping
// (and Google's APIs) give it.
func httpStatus(c codes.Code) int {
	switch c {
	case codes.OK:
		return http.StatusOK
	case codes.Canceled:
		return 499
	case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange:
		return http.StatusBadRequest
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	case codes.NotFound:
		return http.StatusNotFound
	case codes.AlreadyExists, codes.Aborted:
		return http.StatusConflict
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.Unimplemented:
		return http.StatusNotImplemented
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
