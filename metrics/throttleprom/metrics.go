// Package throttleprom exports throttle's events as Prometheus metrics. It
// is a module of its own, so that the library's module does not depend on
// the Prometheus client.
//
// A Metrics registers its collectors once and hands out observers for
// the parts of throttle that report events:
//
//	m := throttleprom.New(prometheus.DefaultRegisterer)
//	rl := server.New(repo, server.WithObserver(m.ServerObserver()))
//	tr := throttle.NewTransport(nil, throttle.WithObserver(m.TransportObserver()))
//	rr, _ := redisrepo.New(client, spec, redisrepo.WithObserver(m.RedisObserver()))
//	m.WatchLimiter("outbound", limiter) // queue depth and free permits
//
// No label carries a caller's key, a host or an address unless
// WithKeyLabel maps keys to a bounded set of values; policy and rule labels
// come from the policy file, and are bounded by it.
package throttleprom

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository/redisrepo"
	"github.com/throttlekit/throttle/server"
)

// Metrics holds throttle's collectors:
//
//	throttle_server_decisions_total{result,policy,rule[,key]}  counter
//	throttle_transport_requests_total{result[,key]}            counter
//	throttle_transport_wait_seconds{[key]}                     histogram
//	throttle_transport_paused_partitions                       gauge
//	throttle_transport_pauses_total{status}                    counter
//	throttle_redis_errors_total{mode}                          counter
//	throttle_redis_breaker_state                               gauge: 0 closed, 1 half-open, 2 open
//	throttle_limiter_queued{limiter}, throttle_limiter_available{limiter}  gauges (WatchLimiter)
//
// Its observers are safe for concurrent use and allocate nothing once a
// label combination has been seen.
type Metrics struct {
	reg      prometheus.Registerer
	keyLabel func(string) string

	server    *prometheus.CounterVec
	serverC   sync.Map // serverLabels → prometheus.Counter
	transport *prometheus.CounterVec
	transC    sync.Map // key label ("" without WithKeyLabel) → *transportSeries
	wait      *prometheus.HistogramVec
	paused    prometheus.Gauge
	pauses    *prometheus.CounterVec
	redisErrs *prometheus.CounterVec
	breaker   prometheus.Gauge

	mu          sync.Mutex
	pausedParts map[string]struct{}
}

// transportSeries are a Transport's series for one key label.
type transportSeries struct {
	acquired, rejected prometheus.Counter
	wait               prometheus.Observer
}

type serverLabels struct {
	kind           server.EventKind
	plan, endpoint string
	key            string
}

// Option configures New.
type Option func(*Metrics)

// WithKeyLabel adds a "key" label to the decision and wait metrics, the
// value f returns for the event's key (a caller, or a Transport's
// partition, a host). f must map keys to a small, bounded set of values
// (a tenant tier, an allow-listed host, "other"): every distinct value is
// a time series held forever.
func WithKeyLabel(f func(key string) string) Option { return func(m *Metrics) { m.keyLabel = f } }

// New creates the collectors and registers them with reg.
func New(reg prometheus.Registerer, opts ...Option) (*Metrics, error) {
	m := &Metrics{reg: reg, pausedParts: map[string]struct{}{}}
	for _, o := range opts {
		o(m)
	}
	withKey := func(ls ...string) []string {
		if m.keyLabel != nil {
			ls = append(ls, "key")
		}
		return ls
	}
	m.server = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "throttle_server_decisions_total",
		Help: "Decisions of server-side rate limiting, by result (allowed, delayed, rejected, shadow_rejected, near_limit, bypassed, forbidden, error), policy (plan) and rule (endpoint pattern).",
	}, withKey("result", "policy", "rule"))
	m.transport = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "throttle_transport_requests_total",
		Help: "Outbound requests of a throttle.Transport by result: acquired (sent) or rejected (refused before sending).",
	}, withKey("result"))
	m.wait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "throttle_transport_wait_seconds",
		Help:    "Time outbound requests waited for their permit.",
		Buckets: []float64{0.0001, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60},
	}, withKey())
	m.paused = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "throttle_transport_paused_partitions",
		Help: "Partitions a server's answer has paused, now.",
	})
	m.pauses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "throttle_transport_pauses_total",
		Help: "Pauses of a partition, by the HTTP status of the answer that caused them (429, 503, or other).",
	}, []string{"status"})
	m.redisErrs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "throttle_redis_errors_total",
		Help: "Calls decided without Redis because it failed, by the fail mode that decided them (open, local, closed).",
	}, []string{"mode"})
	m.breaker = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "throttle_redis_breaker_state",
		Help: "The Redis circuit breaker's state: 0 closed, 1 half-open, 2 open.",
	})
	for _, c := range []prometheus.Collector{m.server, m.transport, m.wait, m.paused, m.pauses, m.redisErrs, m.breaker} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
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
		l := serverLabels{kind: ev.Kind, plan: ev.Plan, endpoint: rule}
		if m.keyLabel != nil {
			l.key = m.keyLabel(ev.Key)
		}
		c, ok := m.serverC.Load(l)
		if !ok {
			vals := []string{ev.Kind.String(), ev.Plan, rule}
			if m.keyLabel != nil {
				vals = append(vals, l.key)
			}
			c, _ = m.serverC.LoadOrStore(l, m.server.WithLabelValues(vals...))
		}
		c.(prometheus.Counter).Inc()
	}
}

// TransportObserver returns an observer for throttle.WithObserver.
func (m *Metrics) TransportObserver() func(throttle.Event) {
	return func(ev throttle.Event) {
		switch ev.Kind {
		case throttle.EventAcquired:
			ts := m.transportSeries(ev.Key)
			ts.acquired.Inc()
			ts.wait.Observe(ev.Wait.Seconds())
		case throttle.EventRejected:
			m.transportSeries(ev.Key).rejected.Inc()
		case throttle.EventPaused:
			m.pauses.WithLabelValues(statusLabel(ev.Status)).Inc()
			m.mu.Lock()
			m.pausedParts[ev.Key] = struct{}{}
			m.paused.Set(float64(len(m.pausedParts)))
			m.mu.Unlock()
		case throttle.EventResumed:
			m.mu.Lock()
			delete(m.pausedParts, ev.Key)
			m.paused.Set(float64(len(m.pausedParts)))
			m.mu.Unlock()
		}
	}
}

// transportSeries returns the series of a partition's key label.
func (m *Metrics) transportSeries(key string) *transportSeries {
	label := ""
	if m.keyLabel != nil {
		label = m.keyLabel(key)
	}
	if ts, ok := m.transC.Load(label); ok {
		return ts.(*transportSeries)
	}
	with := func(vals ...string) []string {
		if m.keyLabel != nil {
			vals = append(vals, label)
		}
		return vals
	}
	ts := &transportSeries{
		acquired: m.transport.WithLabelValues(with(throttle.EventAcquired.String())...),
		rejected: m.transport.WithLabelValues(with(throttle.EventRejected.String())...),
		wait:     m.wait.WithLabelValues(with()...),
	}
	v, _ := m.transC.LoadOrStore(label, ts)
	return v.(*transportSeries)
}

// statusLabel keeps the status label bounded: 429, 503, or other.
func statusLabel(status int) string {
	if status == 429 || status == 503 {
		return strconv.Itoa(status)
	}
	return "other"
}

// RedisObserver returns an observer for redisrepo.WithObserver.
func (m *Metrics) RedisObserver() func(redisrepo.Event) {
	return func(ev redisrepo.Event) {
		switch ev.Kind {
		case redisrepo.EventBreaker:
			switch ev.State {
			case "closed":
				m.breaker.Set(0)
			case "half-open":
				m.breaker.Set(1)
			case "open":
				m.breaker.Set(2)
			}
		case redisrepo.EventFailOpen:
			m.redisErrs.WithLabelValues("open").Inc()
		case redisrepo.EventFailLocal:
			m.redisErrs.WithLabelValues("local").Inc()
		case redisrepo.EventFailClosed:
			m.redisErrs.WithLabelValues("closed").Inc()
		}
	}
}

// WatchLimiter exports l's queue depth and free permits as
// throttle_limiter_queued and throttle_limiter_available with the label
// limiter=name, read from l.Stats at each scrape.
func (m *Metrics) WatchLimiter(name string, l limiters.Limiter) error {
	labels := prometheus.Labels{"limiter": name}
	q := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "throttle_limiter_queued", Help: "Waiters queued on a limiter.", ConstLabels: labels,
	}, func() float64 { return float64(l.Stats().Queued) })
	a := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "throttle_limiter_available", Help: "Permits a limiter has free.", ConstLabels: labels,
	}, func() float64 { return float64(l.Stats().Available) })
	if err := m.reg.Register(q); err != nil {
		return err
	}
	return m.reg.Register(a)
}

// WatchTransport exports tr's queue depth and requests on the wire as
// throttle_transport_queued and throttle_transport_in_flight with the label
// transport=name, read from one tr.Stats at each scrape. (Requests waiting
// for the Transport's own limiter are that limiter's: see WatchLimiter.)
func (m *Metrics) WatchTransport(name string, tr *throttle.Transport) error {
	labels := prometheus.Labels{"transport": name}
	return m.reg.Register(transportCollector{
		tr: tr,
		queued: prometheus.NewDesc("throttle_transport_queued",
			"Requests waiting for their turn in the Transport's partitions.", nil, labels),
		inFlight: prometheus.NewDesc("throttle_transport_in_flight",
			"Requests the Transport let through and that are not yet answered.", nil, labels),
	})
}

// transportCollector reads one Stats per scrape for both gauges.
type transportCollector struct {
	tr               *throttle.Transport
	queued, inFlight *prometheus.Desc
}

func (c transportCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.queued
	ch <- c.inFlight
}

func (c transportCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.tr.Stats()
	ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(s.Queued))
	ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(s.InFlight))
}
