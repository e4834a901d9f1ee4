// Package throttleotel exports throttle's events as OpenTelemetry
// metrics: the instruments of metrics/throttleprom, with the same bounded
// attributes, for services that export through OpenTelemetry. It is a
// module of its own, so that the library's module does not depend on
// OpenTelemetry.
//
// A Metrics creates its instruments once, from a MeterProvider, and hands
// out observers for the parts of throttle that report events:
//
//	m, err := throttleotel.New(otel.GetMeterProvider())
//	rl := server.New(repo, server.WithObserver(m.ServerObserver()))
//	tr := throttle.NewTransport(nil, throttle.WithObserver(m.TransportObserver()))
//	rr, _ := redisrepo.New(client, spec, redisrepo.WithObserver(m.RedisObserver()))
//	m.WatchLimiter("outbound", limiter) // queue depth and free permits
//
// No attribute carries a caller's key, a host or an address unless
// WithKeyAttribute maps keys to a bounded set of values; policy and rule
// attributes come from the policy file, and are bounded by it.
package throttleotel

import (
	"context"
	"strconv"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository/redisrepo"
	"github.com/throttlekit/throttle/server"
)

// ScopeName is the instrumentation scope of the Meter a Metrics uses.
const ScopeName = "github.com/throttlekit/throttle/metrics/throttleotel"

// Metrics holds throttle's instruments (throttleprom's, named the
// OpenTelemetry way; a Prometheus exporter gives them throttleprom's
// names):
//
//	throttle.server.decisions{result,policy,rule[,key]}  counter
//	throttle.transport.requests{result[,key]}            counter
//	throttle.transport.wait{[key]}                       histogram, seconds
//	throttle.transport.paused_partitions                 gauge
//	throttle.transport.pauses{status}                    counter
//	throttle.redis.errors{mode}                          counter
//	throttle.redis.breaker_state                         gauge: 0 closed, 1 half-open, 2 open
//	throttle.limiter.queued{limiter}, throttle.limiter.available{limiter}  gauges (WatchLimiter)
//	throttle.transport.queued{transport}, throttle.transport.in_flight{transport}  gauges (WatchTransport)
//
// Its observers are safe for concurrent use; once an attribute
// combination has been seen they make no attribute set again (what the
// SDK allocates per measurement remains: one or two allocations).
type Metrics struct {
	meter    metric.Meter
	keyAttr  func(string) string
	server   metric.Int64Counter
	serverA  sync.Map // serverAttrs → metric.AddOption
	requests metric.Int64Counter
	transA   sync.Map // key attribute ("" without WithKeyAttribute) → *transportAttrs
	wait     metric.Float64Histogram
	paused   metric.Int64Gauge
	pauses   metric.Int64Counter
	redis    metric.Int64Counter
	breaker  metric.Int64Gauge

	mu          sync.Mutex
	pausedParts map[string]struct{}
}

type serverAttrs struct {
	kind           server.EventKind
	plan, endpoint string
	key            string
}

// transportAttrs are a Transport's measurement options for one key
// attribute.
type transportAttrs struct {
	acquired, rejected metric.AddOption
	wait               metric.RecordOption
}

// Option configures New.
type Option func(*Metrics)

// WithKeyAttribute adds a "key" attribute to the decision and wait
// instruments, the value f returns for the event's key (a caller, or a
// Transport's partition). f must map keys to a small, bounded set of
// values (a tenant tier, an allow-listed host, "other").
func WithKeyAttribute(f func(key string) string) Option { return func(m *Metrics) { m.keyAttr = f } }

// waitBuckets are throttleprom's wait histogram buckets, in seconds.
var waitBuckets = []float64{0.0001, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60}

// New creates the instruments from mp's Meter for ScopeName.
func New(mp metric.MeterProvider, opts ...Option) (*Metrics, error) {
	m := &Metrics{meter: mp.Meter(ScopeName), pausedParts: map[string]struct{}{}}
	for _, o := range opts {
		o(m)
	}
	var err error
	set := func(e error) {
		if err == nil {
			err = e
		}
	}
	var e error
	m.server, e = m.meter.Int64Counter("throttle.server.decisions", metric.WithUnit("{decision}"),
		metric.WithDescription("Decisions of server-side rate limiting, by result (allowed, delayed, rejected, shadow_rejected, near_limit, bypassed, forbidden, error), policy (plan) and rule (endpoint pattern)."))
	set(e)
	m.requests, e = m.meter.Int64Counter("throttle.transport.requests", metric.WithUnit("{request}"),
		metric.WithDescription("Outbound requests of a throttle.Transport by result: acquired (sent) or rejected (refused before sending)."))
	set(e)
	m.wait, e = m.meter.Float64Histogram("throttle.transport.wait", metric.WithUnit("s"),
		metric.WithDescription("Time outbound requests waited for their permit."), metric.WithExplicitBucketBoundaries(waitBuckets...))
	set(e)
	m.paused, e = m.meter.Int64Gauge("throttle.transport.paused_partitions", metric.WithUnit("{partition}"),
		metric.WithDescription("Partitions a server's answer has paused, now."))
	set(e)
	m.pauses, e = m.meter.Int64Counter("throttle.transport.pauses", metric.WithUnit("{pause}"),
		metric.WithDescription("Pauses of a partition, by the HTTP status of the answer that caused them (429, 503, or other)."))
	set(e)
	m.redis, e = m.meter.Int64Counter("throttle.redis.errors", metric.WithUnit("{call}"),
		metric.WithDescription("Calls decided without Redis because it failed, by the fail mode that decided them (open, local, closed)."))
	set(e)
	m.breaker, e = m.meter.Int64Gauge("throttle.redis.breaker_state",
		metric.WithDescription("The Redis circuit breaker's state: 0 closed, 1 half-open, 2 open."))
	set(e)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// ServerObserver returns an observer for server.WithObserver.
func (m *Metrics) ServerObserver() func(server.Event) {
	return func(ev server.Event) {
		rule := ev.Endpoint
		if rule == "" && ev.Plan != "" {
			rule = "default" // the plan's default rule
		}
		a := serverAttrs{kind: ev.Kind, plan: ev.Plan, endpoint: rule}
		if m.keyAttr != nil {
			a.key = m.keyAttr(ev.Key)
		}
		o, ok := m.serverA.Load(a)
		if !ok {
			kv := []attribute.KeyValue{
				attribute.String("result", ev.Kind.String()),
				attribute.String("policy", ev.Plan),
				attribute.String("rule", rule),
			}
			if m.keyAttr != nil {
				kv = append(kv, attribute.String("key", a.key))
			}
			o, _ = m.serverA.LoadOrStore(a, metric.WithAttributeSet(attribute.NewSet(kv...)))
		}
		m.server.Add(context.Background(), 1, o.(metric.AddOption))
	}
}

// TransportObserver returns an observer for throttle.WithObserver (and
// grpcthrottle.WithObserver).
func (m *Metrics) TransportObserver() func(throttle.Event) {
	ctx := context.Background()
	return func(ev throttle.Event) {
		switch ev.Kind {
		case throttle.EventAcquired:
			ta := m.transportAttrs(ev.Key)
			m.requests.Add(ctx, 1, ta.acquired)
			m.wait.Record(ctx, ev.Wait.Seconds(), ta.wait)
		case throttle.EventRejected:
			m.requests.Add(ctx, 1, m.transportAttrs(ev.Key).rejected)
		case throttle.EventPaused:
			m.pauses.Add(ctx, 1, statusOption(ev.Status))
			m.mu.Lock()
			m.pausedParts[ev.Key] = struct{}{}
			m.paused.Record(ctx, int64(len(m.pausedParts)))
			m.mu.Unlock()
		case throttle.EventResumed:
			m.mu.Lock()
			delete(m.pausedParts, ev.Key)
			m.paused.Record(ctx, int64(len(m.pausedParts)))
			m.mu.Unlock()
		}
	}
}

func (m *Metrics) transportAttrs(key string) *transportAttrs {
	label := ""
	if m.keyAttr != nil {
		label = m.keyAttr(key)
	}
	if ta, ok := m.transA.Load(label); ok {
		return ta.(*transportAttrs)
	}
	with := func(kv ...attribute.KeyValue) attribute.Set {
		if m.keyAttr != nil {
			kv = append(kv, attribute.String("key", label))
		}
		return attribute.NewSet(kv...)
	}
	ta := &transportAttrs{
		acquired: metric.WithAttributeSet(with(attribute.String("result", throttle.EventAcquired.String()))),
		rejected: metric.WithAttributeSet(with(attribute.String("result", throttle.EventRejected.String()))),
		wait:     metric.WithAttributeSet(with()),
	}
	v, _ := m.transA.LoadOrStore(label, ta)
	return v.(*transportAttrs)
}

// The status attribute is bounded: 429, 503, or other.
var (
	status429   = metric.WithAttributeSet(attribute.NewSet(attribute.String("status", strconv.Itoa(429))))
	status503   = metric.WithAttributeSet(attribute.NewSet(attribute.String("status", strconv.Itoa(503))))
	statusOther = metric.WithAttributeSet(attribute.NewSet(attribute.String("status", "other")))
)

func statusOption(status int) metric.AddOption {
	switch status {
	case 429:
		return status429
	case 503:
		return status503
	}
	return statusOther
}

var (
	modeOpen   = metric.WithAttributeSet(attribute.NewSet(attribute.String("mode", "open")))
	modeLocal  = metric.WithAttributeSet(attribute.NewSet(attribute.String("mode", "local")))
	modeClosed = metric.WithAttributeSet(attribute.NewSet(attribute.String("mode", "closed")))
)

// RedisObserver returns an observer for redisrepo.WithObserver.
func (m *Metrics) RedisObserver() func(redisrepo.Event) {
	ctx := context.Background()
	return func(ev redisrepo.Event) {
		switch ev.Kind {
		case redisrepo.EventBreaker:
			switch ev.State {
			case "closed":
				m.breaker.Record(ctx, 0)
			case "half-open":
				m.breaker.Record(ctx, 1)
			case "open":
				m.breaker.Record(ctx, 2)
			}
		case redisrepo.EventFailOpen:
			m.redis.Add(ctx, 1, modeOpen)
		case redisrepo.EventFailLocal:
			m.redis.Add(ctx, 1, modeLocal)
		case redisrepo.EventFailClosed:
			m.redis.Add(ctx, 1, modeClosed)
		}
	}
}

// WatchLimiter exports l's queue depth and free permits as
// throttle.limiter.queued and throttle.limiter.available with the
// attribute limiter=name, read from l.Stats at each collection. The
// returned Registration stops it.
func (m *Metrics) WatchLimiter(name string, l limiters.Limiter) (metric.Registration, error) {
	q, err := m.meter.Int64ObservableGauge("throttle.limiter.queued", metric.WithUnit("{waiter}"),
		metric.WithDescription("Waiters queued on a limiter."))
	if err != nil {
		return nil, err
	}
	a, err := m.meter.Int64ObservableGauge("throttle.limiter.available", metric.WithUnit("{permit}"),
		metric.WithDescription("Permits a limiter has free."))
	if err != nil {
		return nil, err
	}
	attrs := metric.WithAttributeSet(attribute.NewSet(attribute.String("limiter", name)))
	return m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := l.Stats()
		o.ObserveInt64(q, int64(s.Queued), attrs)
		o.ObserveInt64(a, int64(s.Available), attrs)
		return nil
	}, q, a)
}

// WatchTransport exports tr's queue depth and requests on the wire as
// throttle.transport.queued and throttle.transport.in_flight with the
// attribute transport=name, read from one tr.Stats at each collection.
// The returned Registration stops it.
func (m *Metrics) WatchTransport(name string, tr *throttle.Transport) (metric.Registration, error) {
	q, err := m.meter.Int64ObservableGauge("throttle.transport.queued", metric.WithUnit("{request}"),
		metric.WithDescription("Requests waiting for their turn in the Transport's partitions."))
	if err != nil {
		return nil, err
	}
	f, err := m.meter.Int64ObservableGauge("throttle.transport.in_flight", metric.WithUnit("{request}"),
		metric.WithDescription("Requests the Transport let through and that are not yet answered."))
	if err != nil {
		return nil, err
	}
	attrs := metric.WithAttributeSet(attribute.NewSet(attribute.String("transport", name)))
	return m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := tr.Stats()
		o.ObserveInt64(q, int64(s.Queued), attrs)
		o.ObserveInt64(f, int64(s.InFlight), attrs)
		return nil
	}, q, f)
}
