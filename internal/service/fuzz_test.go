package service

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/throttlekit/throttle/repository/ratelimitd"
)

// FuzzCheck sends arbitrary bodies to POST /v1/check and /v1/check/batch:
// the answer is 200 with a decision or a 4xx problem, never a panic or a
// 5xx.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		`{"key":"a"}`, `{"key":"a","cost":3,"endpoint":"POST /api/ask","plan":"pro"}`,
		`{"checks":[{"key":"a"},{"key":""}]}`, `{"key":"a\u0000"}`, `{"key":1}`, `[]`, `null`,
		`{"key":"a","endpoint":"GET /x/../y"}`, `{"key":"a","cost":1e99}`, "{\"key\":\"\xff\"}",
	} {
		f.Add(s)
	}
	svc, err := New(Config{Policy: []byte(testPolicy), Logger: discard()})
	if err != nil {
		f.Fatal(err)
	}
	defer svc.Close()
	h := svc.Handler()
	f.Fuzz(func(t *testing.T, body string) {
		for _, path := range []string{"/v1/check", "/v1/check/batch"} {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("POST", path, strings.NewReader(body)))
			if w.Code != http.StatusOK && (w.Code < 400 || w.Code >= 500) {
				t.Fatalf("%s %q: status %d: %s", path, body, w.Code, w.Body)
			}
			if w.Code != http.StatusOK && w.Header().Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%s %q: a %d without problem+json", path, body, w.Code)
			}
		}
		if _, _, p := validate(ratelimitd.Check{Key: body, Endpoint: body, Plan: body}); p != nil && p.Status != 400 {
			t.Fatalf("validate: %+v", p)
		}
	})
}
