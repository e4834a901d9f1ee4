package service

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/throttlekit/throttle/headers"
	"github.com/throttlekit/throttle/repository/ratelimitd"
	"github.com/throttlekit/throttle/server"
)

// maxCheckBody bounds the body of POST /v1/check.
const maxCheckBody = 16 << 10

// Handler returns the service's API:
//
//	POST   /v1/check            a ratelimitd.Check → a ratelimitd.Result
//	POST   /v1/check/batch      a ratelimitd.BatchRequest → a ratelimitd.BatchResponse
//	GET    /v1/state/{key}      a peek (?endpoint=&plan=), spending nothing
//	DELETE /v1/state/{key}      reset the key in every rule (admin)
//	GET    /v1/policies         the policy in force
//	POST   /v1/policies/reload  reload the policy file (admin)
//	GET    /healthz, /readyz, /metrics
//
// A check with an Idempotency-Key header is decided once: a retry within
// the TTL gets the first answer. Bad input is a 400 problem+json answer.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/check", s.idempotent(maxCheckBody, s.handleCheck))
	mux.HandleFunc("POST /v1/check/batch", s.idempotent(ratelimitd.MaxBodySize, s.handleBatch))
	mux.HandleFunc("GET /v1/state/{key}", s.handleState)
	mux.HandleFunc("DELETE /v1/state/{key}", s.admin(s.handleReset))
	mux.HandleFunc("GET /v1/policies", s.handlePolicies)
	mux.HandleFunc("POST /v1/policies/reload", s.admin(s.handleReload))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		write(w, http.StatusOK, jsonBytes(map[string]string{"status": "ok"}))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := s.Ready(ctx); err != nil {
			writeProblem(w, problem(http.StatusServiceUnavailable, "redis is not answering: "+err.Error()))
			return
		}
		write(w, http.StatusOK, jsonBytes(map[string]string{"status": "ready", "backend": s.backend()}))
	})
	if s.cfg.Metrics != nil {
		mux.Handle("GET /metrics", s.cfg.Metrics)
	}
	return mux
}

func problem(status int, detail string) *ratelimitd.Problem {
	return &ratelimitd.Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail}
}

func jsonBytes(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil { // cannot happen: our types marshal
		panic(err)
	}
	return append(b, '\n')
}

// write answers status with a JSON body (problem+json unless 2xx).
func write(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	if status/100 == 2 {
		h.Set("Content-Type", "application/json")
	} else {
		h.Set("Content-Type", "application/problem+json")
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeProblem(w http.ResponseWriter, p *ratelimitd.Problem) { write(w, p.Status, jsonBytes(p)) }

// admin requires the admin bearer token, compared in constant time.
func (s *Service) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.AdminToken == "" {
			writeProblem(w, problem(http.StatusForbidden, "admin endpoints are disabled: start the service with RATELIMITD_ADMIN_TOKEN set"))
			return
		}
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !tokenEqual(tok, s.cfg.AdminToken) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="ratelimitd"`)
			writeProblem(w, problem(http.StatusUnauthorized, "a valid admin bearer token is required"))
			return
		}
		h(w, r)
	}
}

// tokenEqual compares in time independent of the tokens' contents and of
// where they differ (hashing first hides the length too).
func tokenEqual(a, b string) bool {
	x, y := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtleEqual(x[:], y[:])
}

// idempotent reads the body (at most limit bytes) and answers with h's
// status and body, deciding once per Idempotency-Key.
func (s *Service) idempotent(limit int64, h func(ctx context.Context, body []byte) (int, []byte)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
		if err != nil {
			var mb *http.MaxBytesError
			if errors.As(err, &mb) {
				writeProblem(w, problem(http.StatusRequestEntityTooLarge, "the body is larger than "+strconv.FormatInt(limit, 10)+" bytes"))
				return
			}
			writeProblem(w, problem(http.StatusBadRequest, "reading the body: "+err.Error()))
			return
		}
		key := r.Header.Get("Idempotency-Key")
		if key == "" {
			status, out := h(r.Context(), body)
			write(w, status, out)
			return
		}
		if len(key) > 255 || !printable(key) {
			writeProblem(w, problem(http.StatusBadRequest, "Idempotency-Key must be 1 to 255 printable ASCII characters"))
			return
		}
		fp := sha256.Sum256(append([]byte(r.URL.Path+"\n"), body...))
		status, out := s.idem.do(r.Context(), r.URL.Path+"\n"+key, fp, func() (int, []byte) { return h(r.Context(), body) })
		if status == http.StatusOK {
			w.Header().Set("Idempotency-Key", key)
		}
		write(w, status, out)
	}
}

// printable reports whether v is visible ASCII (spaces allowed inside).
func printable(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return v != ""
}

// decodeStrict decodes one JSON value into v: unknown fields and trailing
// data are errors.
func decodeStrict(body []byte, v any) *ratelimitd.Problem {
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return problem(http.StatusBadRequest, "malformed JSON body: "+err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return problem(http.StatusBadRequest, "malformed JSON body: data after the JSON value")
	}
	return nil
}

func (s *Service) handleCheck(ctx context.Context, body []byte) (int, []byte) {
	var c ratelimitd.Check
	if p := decodeStrict(body, &c); p != nil {
		return p.Status, jsonBytes(p)
	}
	res, p := s.decide(ctx, c, false)
	if p != nil {
		return p.Status, jsonBytes(p)
	}
	return http.StatusOK, jsonBytes(res)
}

func (s *Service) handleState(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	zero := 0
	c := ratelimitd.Check{Key: r.PathValue("key"), Cost: &zero, Endpoint: q.Get("endpoint"), Plan: q.Get("plan")}
	res, p := s.decide(r.Context(), c, true)
	if p != nil {
		writeProblem(w, p)
		return
	}
	write(w, http.StatusOK, jsonBytes(res))
}

func (s *Service) handleReset(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	if p := checkKey(key); p != nil {
		writeProblem(w, p)
		return
	}
	g := s.acquire()
	if g == nil {
		writeProblem(w, errShutdown)
		return
	}
	defer g.mu.RUnlock()
	var err error
	for _, rr := range g.repos {
		err = errors.Join(err, rr.admin.Reset(r.Context(), key))
	}
	if err != nil {
		writeProblem(w, problem(http.StatusServiceUnavailable, "reset failed: "+err.Error()))
		return
	}
	write(w, http.StatusOK, jsonBytes(map[string]any{"reset": true, "key": key, "rules": len(g.repos)}))
}

// errShutdown answers calls that come after Close.
var errShutdown = problem(http.StatusServiceUnavailable, "the service is shutting down")

// info returns the policy in force; false after Close.
func (s *Service) info() (PolicyInfo, bool) {
	g := s.acquire()
	if g == nil {
		return PolicyInfo{}, false
	}
	defer g.mu.RUnlock()
	return g.info, true
}

func (s *Service) handlePolicies(w http.ResponseWriter, _ *http.Request) {
	info, ok := s.info()
	if !ok {
		writeProblem(w, errShutdown)
		return
	}
	write(w, http.StatusOK, jsonBytes(info))
}

func (s *Service) handleReload(w http.ResponseWriter, _ *http.Request) {
	if err := s.Reload(); err != nil {
		p := problem(http.StatusUnprocessableEntity, err.Error())
		p.Title = "Invalid Policy"
		var pe *server.PolicyError
		if errors.As(err, &pe) {
			p.Line, p.Column = pe.Line, pe.Column
		}
		writeProblem(w, p)
		return
	}
	info, ok := s.info()
	if !ok {
		writeProblem(w, errShutdown)
		return
	}
	write(w, http.StatusOK, jsonBytes(map[string]any{"reloaded": true, "file": info.File, "sha256": info.SHA256}))
}

// outcomeKey is the context key of a check's *outcome.
type outcomeKey struct{}

// outcome is what the policy's middleware did with a check.
type outcome struct {
	seen     bool // ev holds the deciding event
	ev       server.Event
	admitted bool
}

// capture is the ResponseWriter a check's middleware writes to: it keeps
// the header fields.
type capture struct{ h http.Header }

func (c *capture) Header() http.Header         { return c.h }
func (c *capture) Write(b []byte) (int, error) { return len(b), nil }
func (c *capture) WriteHeader(int)             {}

// admit is the handler behind the policy's middleware: reaching it means
// the check was admitted.
var admit = http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
	if o, ok := r.Context().Value(outcomeKey{}).(*outcome); ok {
		o.admitted = true
	}
})

// decide validates c and runs it through the policy as a request to its
// endpoint.
func (s *Service) decide(ctx context.Context, c ratelimitd.Check, peek bool) (ratelimitd.Result, *ratelimitd.Problem) {
	method, path, p := validate(c)
	if p != nil {
		return ratelimitd.Result{}, p
	}
	g := s.acquire()
	if g == nil {
		return ratelimitd.Result{}, errShutdown
	}
	defer g.mu.RUnlock()
	return decideIn(ctx, g, c, method, path, peek)
}

// decideIn runs the validated check c (its endpoint split into method and
// path) through g's policy.
func decideIn(ctx context.Context, g *generation, c ratelimitd.Check, method, path string, peek bool) (ratelimitd.Result, *ratelimitd.Problem) {
	cost := 1
	if c.Cost != nil {
		cost = *c.Cost
	}
	o := &outcome{}
	req := (&http.Request{
		Method: method,
		URL:    &url.URL{Path: path},
		Host:   "ratelimitd",
		Header: http.Header{hdrKey: {c.Key}, hdrPlan: {c.Plan}, hdrCost: {strconv.Itoa(cost)}},
	}).WithContext(context.WithValue(ctx, outcomeKey{}, o))
	w := &capture{h: make(http.Header, 8)}
	g.mw.ServeHTTP(w, req)
	if o.seen && o.ev.Kind == server.EventError {
		return ratelimitd.Result{}, problem(http.StatusServiceUnavailable, "the limits' backend failed: "+o.ev.Err.Error())
	}
	res := ratelimitd.Result{Allowed: o.admitted}
	if o.seen {
		d := o.ev.Decision
		res.Limit, res.Remaining = d.Limit, d.Remaining
		res.ResetAfter = d.ResetAfter.Seconds()
		retry := 0.0
		if !o.admitted {
			retry = d.RetryAfter.Seconds()
		}
		res.RetryAfter = &retry
		if ls := o.ev.Limits; len(ls) > 0 {
			// The top-level numbers are the binding limit's, all of them.
			b := &ls[headers.Binding(ls)]
			res.Limit, res.Remaining = int(min(b.Quota, math.MaxInt32)), int(min(b.Remaining, math.MaxInt32))
			res.ResetAfter = max(b.Reset, 0).Seconds()
			if b.Refused {
				retry = b.RetryAfter.Seconds()
				res.ResetAfter = max(b.Reset, b.RetryAfter).Seconds()
			}
			res.Limits = make([]ratelimitd.LimitState, len(ls))
			for i := range ls {
				res.Limits[i] = limitState(&ls[i])
			}
		}
		if o.ev.Final {
			res.Final, res.RetryAfter = true, nil
		}
		res.Policy, res.Rule = o.ev.Plan, o.ev.Endpoint
		if res.Rule == "" {
			res.Rule = "default"
		}
		if peek {
			res.Allowed = d.Remaining > 0 || d.Limit == 0
		}
	}
	for name, v := range w.h {
		if rateLimitField(name) && len(v) > 0 {
			if res.Headers == nil {
				res.Headers = make(map[string]string, len(w.h))
			}
			res.Headers[name] = v[0]
		}
	}
	return res, nil
}

// limitState is one limit as the JSON answer lists it.
func limitState(l *headers.Limit) ratelimitd.LimitState {
	st := ratelimitd.LimitState{Name: l.Name, Limit: l.Quota, Window: l.Window.Seconds(), Unit: l.Unit, Remaining: l.Remaining, Refused: l.Refused, Final: l.Final}
	if l.Reset >= 0 {
		t := l.Reset.Seconds()
		if l.Refused {
			t = max(l.Reset, l.RetryAfter).Seconds()
		}
		st.ResetAfter = &t
	}
	if l.Refused && !l.Final {
		w := l.RetryAfter.Seconds()
		st.RetryAfter = &w
	}
	return st
}

func rateLimitField(name string) bool {
	n := strings.ToLower(name)
	return strings.HasPrefix(n, "ratelimit") || strings.HasPrefix(n, "x-ratelimit") || n == "retry-after"
}

// validate checks c's fields and splits its endpoint.
func validate(c ratelimitd.Check) (method, path string, p *ratelimitd.Problem) {
	if p := checkKey(c.Key); p != nil {
		return "", "", p
	}
	if c.Cost != nil && (*c.Cost < 0 || *c.Cost > ratelimitd.MaxCost) {
		return "", "", problem(http.StatusBadRequest, "cost must be 0 to "+strconv.Itoa(ratelimitd.MaxCost)+", got "+strconv.Itoa(*c.Cost))
	}
	if len(c.Plan) > 128 || !visible(c.Plan) {
		return "", "", problem(http.StatusBadRequest, "plan must be at most 128 bytes of UTF-8 without spaces or control characters")
	}
	method, path = http.MethodGet, c.Endpoint
	if path == "" {
		path = "/"
	}
	if m, rest, ok := strings.Cut(path, " "); ok {
		method, path = m, rest
	}
	if len(c.Endpoint) > 1024 || method == "" || strings.Trim(method, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" ||
		!strings.HasPrefix(path, "/") || !visible(path) || strings.ContainsAny(path, "?#") {
		return "", "", problem(http.StatusBadRequest, `endpoint must be "METHOD /path" or "/path" (at most 1024 bytes, no query)`)
	}
	return method, path, nil
}

// checkKey checks a caller key.
func checkKey(k string) *ratelimitd.Problem {
	if k == "" || len(k) > ratelimitd.MaxKeyLen || !utf8.ValidString(k) || strings.ContainsFunc(k, control) {
		return problem(http.StatusBadRequest, "key must be 1 to "+strconv.Itoa(ratelimitd.MaxKeyLen)+" bytes of UTF-8 without control characters")
	}
	return nil
}

func control(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// visible reports whether v is UTF-8 without spaces or control characters.
func visible(v string) bool {
	return utf8.ValidString(v) && !strings.ContainsFunc(v, func(r rune) bool { return r == ' ' || control(r) })
}
