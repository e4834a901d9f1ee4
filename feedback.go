package throttle

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/throttlekit/throttle/feedbackstore"
)

// FeedbackStore shares what Transports learn of their partitions, so that a
// fleet of processes behind one API key behaves as one client: a pause one
// Transport learns (a 429 with Retry-After, a quota at zero, a learned
// pace) is honoured by every Transport sharing the store; after a pause,
// one Transport of the fleet is elected to send the probe; and a window
// quota the server reports is spent once, by the whole fleet: what the
// server says remains, less the requests every Transport has on the wire.
//
// A Transport only talks to the store about partitions the servers have
// said something about: a request through a quiet partition makes no call
// to the store. When a call fails, the Transport goes on with what it
// learned itself and tells its observer (EventStoreUnavailable).
//
// A Transport that joins during a pause honours it: Subscribe tells it of
// the pauses in force.
//
// NewMemoryFeedbackStore shares within one process;
// redisrepo.NewFeedbackStore shares across processes: pass one to
// WithFeedbackStore. The methods below are for those who implement a
// store (the values they pass live in package feedbackstore); a
// Transport calls them, its users never do. Keys are partition keys; ids
// name the Transport that calls (one per Transport).
type FeedbackStore interface {
	// Pause records that key is paused until until and tells every
	// subscriber. The probe lease of key is id's until then: no Transport
	// probes before the pause ends, even one the notice reaches late.
	Pause(ctx context.Context, key, id string, until time.Time) error
	// Resume tells every subscriber that key's pause is over (id's probe
	// was admitted), and ends id's probe lease on key.
	Resume(ctx context.Context, key, id string) error
	// Probe elects the Transport that sends the probe after key's pause:
	// it returns the zero time if id holds the lease (it may probe), for
	// at most lease; else the end of the lease another Transport holds.
	Probe(ctx context.Context, key, id string, lease time.Duration) (held time.Time, err error)
	// Claim takes one unit of key's shared quota for a request about to be
	// sent (feedbackstore.Grant.Seq > 0). It refuses until the quota's
	// reset (Grant.Spent) when the server said nothing remains, and for a moment
	// when the claims on the wire may spend what remains, or while the
	// quota is known only from answers to unclaimed requests and a claim
	// is on the wire. A key with no quota known, or whose reset has
	// passed, admits.
	Claim(ctx context.Context, key string) (feedbackstore.Grant, error)
	// Settle records, when a request's answer came, what the answer said
	// of the quota (if q.Known) and that its claim g (if g.Seq > 0) is off
	// the wire. A later reset starts a new window; within a window the
	// count only falls, so the least said holds.
	Settle(ctx context.Context, key string, g feedbackstore.Grant, q feedbackstore.SharedQuota) error
	// Subscribe calls f with every Pause and Resume of any Transport
	// sharing the store (its own too), until stop is called, having first
	// called it with the pauses in force (so that a Transport that joins
	// during a pause honours it). f must not block.
	Subscribe(f func(feedbackstore.Notice)) (stop func())
}

// WithFeedbackStore makes the Transport share what it learns of its
// partitions through s, with every Transport using s. The Transport does
// not own s: closing the Transport leaves s open. Buckets a server names
// (partition#bucket) and paces learned from bare refusals stay local;
// the pauses they cause are shared. A nil s panics.
func WithFeedbackStore(s FeedbackStore) Option {
	mustNotBeNil(s, "WithFeedbackStore", "store")
	return func(t *Transport) { t.store = s }
}

// sharing is a Transport's FeedbackStore and its name there.
type sharing struct {
	store     FeedbackStore // WithFeedbackStore's, or nil
	id        string        // this Transport's name in the store
	unsub     func()
	storeDown atomic.Bool // the last call to the store failed
}

// probeLease is how long a Transport elected to probe holds the election:
// a prober that dies or hangs delays the others by at most this long.
const probeLease = 5 * time.Second

// probeRecheck is how long a Transport that lost the election waits for
// the notice of the probe's outcome before it asks the store again: a
// notice published before its hold took effect would otherwise leave it
// waiting out the whole lease (TestFeedbackStoreSharesAQuota took 5 s
// longer in about one run in four).
const probeRecheck = 250 * time.Millisecond

// storeTimeout bounds one call to the store: a store slower than that is
// as good as down, and the Transport goes on alone.
const storeTimeout = time.Second

// newID is a Transport's name in its FeedbackStore.
func newID() string { return strconv.FormatUint(rand.Uint64(), 36) }

// storeErr tells the observer, once per outage, that the store failed; a
// nil err ends the outage.
func (t *Transport) storeErr(key string, err error) {
	if err == nil {
		t.storeDown.Store(false)
		return
	}
	if !t.storeDown.Swap(true) {
		t.emit(Event{Kind: EventStoreUnavailable, Key: key, Err: err})
	}
}

// notice applies what another Transport (or this one) published.
func (t *Transport) notice(n feedbackstore.Notice) {
	if t.closed.Load() {
		return
	}
	g := t.gate(n.Key)
	if n.Until.IsZero() {
		g.resumeShared()
		return
	}
	g.hold(n.Until, false)
}

// coordinate asks the store whether the request let through by the
// partition's own gate g with ticket tk may go: a probe must win the
// election, a request through a partition with a shared quota must claim a
// unit of it. When it may not, the admission is undone, the gate holds
// until the store says, and coordinate reports false (the caller queues
// again). claim is the unit claimed (to settle), if any.
func (t *Transport) coordinate(ctx context.Context, g *gate, tk *ticket) (ok bool, claim feedbackstore.Grant) {
	if !tk.probe && !g.is(shared) {
		return true, feedbackstore.Grant{} // a quiet partition: no call to the store
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if tk.probe {
		held, err := t.store.Probe(ctx, g.key, t.id, probeLease)
		t.storeErr(g.key, err)
		if err == nil && !held.IsZero() {
			// Another probes, or the pause it learned is not over: wait
			// for the notice of its answer, or the end of its lease, but
			// ask again after probeRecheck.
			now := time.Now()
			g.abort(tk)
			g.hold(minTime(maxTime(held, now.Add(time.Millisecond)), now.Add(probeRecheck)), true)
			return false, feedbackstore.Grant{}
		}
	}
	if !g.is(shared) {
		return true, feedbackstore.Grant{}
	}
	claim, err := t.store.Claim(ctx, g.key)
	t.storeErr(g.key, err)
	if err != nil || claim.Seq > 0 {
		return true, claim
	}
	g.abort(tk)
	if now := time.Now(); claim.Spent && claim.Retry.After(now) {
		g.hold(claim.Retry, false)
	} else {
		// A retry this clock already passed (the store's runs ahead):
		// ask again a little later rather than at once.
		g.holdBack(maxTime(claim.Retry, now.Add(blind)))
	}
	return false, feedbackstore.Grant{}
}

// share tells the store what the answer a to a request through the
// partition's own gate g taught: a pause it began, the end of a pause (a
// probe's answer that paused nothing), the quota it reports; and settles
// the request's claim. a is nil after a transport error.
func (t *Transport) share(g *gate, tk *ticket, claim feedbackstore.Grant, a *answer, paused time.Time) {
	var q feedbackstore.SharedQuota
	if a != nil {
		if s, ok := tightest(a.info); ok && !a.refill && !s.Reset.IsZero() {
			q = feedbackstore.SharedQuota{Known: true, Remaining: s.Remaining, Reset: s.Reset}
			g.mark(shared)
		}
	}
	resume := tk.probe && a != nil // unless the answer paused: then Pause
	if claim.Seq == 0 && !q.Known && paused.IsZero() && !resume {
		return // the server said nothing: no call to the store
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	var err error
	if claim.Seq > 0 || q.Known {
		err = t.store.Settle(ctx, g.key, claim, q)
	}
	switch {
	case err != nil:
	case !paused.IsZero():
		err = t.store.Pause(ctx, g.key, t.id, paused)
	case resume:
		err = t.store.Resume(ctx, g.key, t.id)
	}
	t.storeErr(g.key, err)
}

// hold pauses the gate until until, as the fleet learned: the next
// request after it probes (or asks to). elsewhere says the pause only
// waits for another Transport's probe: the first notice of its outcome
// replaces it, even with an earlier end.
func (g *gate) hold(until time.Time, elsewhere bool) {
	g.mu.Lock()
	now := time.Now()
	if g.closed || !until.After(now) {
		g.mu.Unlock()
		return
	}
	if g.pz.elsewhere && !elsewhere && g.pz.on {
		g.pz.until = until
	} else if !until.After(g.pz.until) {
		g.mu.Unlock()
		return
	}
	g.pz.elsewhere = elsewhere
	g.pauseUntil(until)
	resumed := g.dispatch(now)
	g.mu.Unlock()
	if !elsewhere && g.emit != nil {
		g.emit(Event{Kind: EventPaused, Key: g.key, Until: until})
	}
	g.report(resumed)
}

// holdBack holds the gate's requests until until, without a pause: the
// fleet's claims on the wire are due back by then.
func (g *gate) holdBack(until time.Time) {
	g.mu.Lock()
	if !g.closed && until.After(g.nextSend) {
		g.nextSend = until
		g.mark(timed)
	}
	resumed := g.dispatch(time.Now())
	g.mu.Unlock()
	g.report(resumed)
}

// resumeShared ends a pause: another Transport's probe was admitted.
func (g *gate) resumeShared() {
	g.mu.Lock()
	now := time.Now()
	if g.closed || !g.pz.on {
		g.mu.Unlock()
		return
	}
	g.pz.until, g.pz.probe, g.pz.elsewhere = now, false, false
	resumed := g.dispatch(now)
	g.mu.Unlock()
	g.report(resumed)
}

// memoryFeedbackStore is NewMemoryFeedbackStore's FeedbackStore.
type memoryFeedbackStore struct {
	mu      sync.Mutex
	probes  map[string]lease
	pauses  map[string]time.Time // the pauses in force, told to a new subscriber
	quotas  map[string]*sharedQuota
	subs    map[int]func(feedbackstore.Notice)
	next    int
	sweepAt int // sweep the keys when there are this many
}

// sweep forgets, once the store holds maxIdleGates keys or twice what
// survived the last sweep, the leases that ran out and the quotas whose
// reset passed with no claim on the wire. s.mu must be held.
func (s *memoryFeedbackStore) sweep(now time.Time) {
	if len(s.probes)+len(s.quotas)+len(s.pauses) < max(s.sweepAt, maxIdleGates) {
		return
	}
	for k, l := range s.probes {
		if !now.Before(l.until) {
			delete(s.probes, k)
		}
	}
	for k, until := range s.pauses {
		if !now.Before(until) {
			delete(s.pauses, k)
		}
	}
	for k, q := range s.quotas {
		if q.inflight == 0 && !now.Before(q.Reset) {
			delete(s.quotas, k)
		}
	}
	s.sweepAt = 2 * (len(s.probes) + len(s.quotas) + len(s.pauses))
}

type lease struct {
	id    string
	until time.Time
}

// sharedQuota is a key's quota in a memoryFeedbackStore: the least any
// answer of its window said remains, the claims made so far (seq) and
// those on the wire; exact once the answer to a claim was heard in the
// window.
type sharedQuota struct {
	feedbackstore.SharedQuota
	seq, inflight int64
	exact         bool
}

// blind is how long a claim waits when the claims on the wire may have
// spent what remains: long enough for their answers to come back.
const blind = 20 * time.Millisecond

// claim takes a unit at now, or says when to ask again. Every claim on
// the wire counts against what remains: answers come back in any order,
// so which of them the server had counted is unknown.
func (q *sharedQuota) claim(now time.Time) feedbackstore.Grant {
	if q.Known && now.Before(q.Reset) {
		if q.Remaining <= 0 {
			return feedbackstore.Grant{Retry: q.Reset, Spent: true}
		}
		if q.Remaining-q.inflight <= 0 || (!q.exact && q.inflight > 0) {
			// Every Transport's first requests go out unclaimed: until the
			// answer to a claim says, one claim at a time.
			return feedbackstore.Grant{Retry: now.Add(blind)}
		}
	}
	q.seq++
	q.inflight++
	return feedbackstore.Grant{Seq: q.seq}
}

// settle records that claim (0: none) is off the wire and what its answer
// said of the quota: a later reset starts a new window, and within a
// window the count only falls.
func (q *sharedQuota) settle(claim int64, sq feedbackstore.SharedQuota) {
	if claim > 0 {
		q.inflight = max(q.inflight-1, 0)
	}
	switch {
	case !sq.Known:
	case !q.Known || sq.Reset.After(q.Reset):
		q.SharedQuota, q.exact = sq, claim > 0
	case sq.Reset.Equal(q.Reset):
		q.Remaining = min(q.Remaining, sq.Remaining)
		q.exact = q.exact || claim > 0
	}
}

// NewMemoryFeedbackStore returns an empty FeedbackStore in memory, shared
// by the Transports of one process (and by tests and examples): give it to
// each with WithFeedbackStore. What it holds of a key is forgotten once it
// no longer matters (a lease that ran out, a quota whose reset passed), so
// the keys it holds stay bounded by those in use. It is safe for
// concurrent use, and needs no closing.
func NewMemoryFeedbackStore() FeedbackStore {
	return &memoryFeedbackStore{
		probes: make(map[string]lease),
		pauses: make(map[string]time.Time),
		quotas: make(map[string]*sharedQuota),
		subs:   make(map[int]func(feedbackstore.Notice)),
	}
}

var _ FeedbackStore = (*memoryFeedbackStore)(nil)

// Pause implements FeedbackStore.
func (s *memoryFeedbackStore) Pause(_ context.Context, key, id string, until time.Time) error {
	s.mu.Lock()
	s.sweep(time.Now())
	s.probes[key] = lease{id: id, until: until}
	s.pauses[key] = until
	s.mu.Unlock()
	s.publish(feedbackstore.Notice{Key: key, Until: until})
	return nil
}

// Resume implements FeedbackStore.
func (s *memoryFeedbackStore) Resume(_ context.Context, key, id string) error {
	s.mu.Lock()
	if s.probes[key].id == id {
		delete(s.probes, key)
	}
	delete(s.pauses, key)
	s.mu.Unlock()
	s.publish(feedbackstore.Notice{Key: key})
	return nil
}

func (s *memoryFeedbackStore) publish(n feedbackstore.Notice) {
	s.mu.Lock()
	subs := make([]func(feedbackstore.Notice), 0, len(s.subs))
	for _, f := range s.subs {
		subs = append(subs, f)
	}
	s.mu.Unlock()
	for _, f := range subs {
		f(n)
	}
}

// Probe implements FeedbackStore.
func (s *memoryFeedbackStore) Probe(_ context.Context, key, id string, d time.Duration) (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if l, ok := s.probes[key]; ok && l.id != id && now.Before(l.until) {
		return l.until, nil
	}
	s.sweep(now)
	s.probes[key] = lease{id: id, until: now.Add(d)}
	return time.Time{}, nil
}

func (s *memoryFeedbackStore) quota(key string) *sharedQuota {
	q := s.quotas[key]
	if q == nil {
		s.sweep(time.Now())
		q = new(sharedQuota)
		s.quotas[key] = q
	}
	return q
}

// Claim implements FeedbackStore.
func (s *memoryFeedbackStore) Claim(_ context.Context, key string) (feedbackstore.Grant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.quota(key).claim(time.Now()), nil
}

// Settle implements FeedbackStore.
func (s *memoryFeedbackStore) Settle(_ context.Context, key string, g feedbackstore.Grant, sq feedbackstore.SharedQuota) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.quota(key).settle(g.Seq, sq)
	return nil
}

// Subscribe implements FeedbackStore. f hears first of the pauses in
// force, so that a Transport that joins during a pause honours it.
func (s *memoryFeedbackStore) Subscribe(f func(feedbackstore.Notice)) (stop func()) {
	s.mu.Lock()
	id := s.next
	s.next++
	s.subs[id] = f
	now := time.Now()
	var force []feedbackstore.Notice
	for k, until := range s.pauses {
		if now.Before(until) {
			force = append(force, feedbackstore.Notice{Key: k, Until: until})
		}
	}
	s.mu.Unlock()
	for _, n := range force {
		f(n)
	}
	return func() {
		s.mu.Lock()
		delete(s.subs, id)
		s.mu.Unlock()
	}
}
