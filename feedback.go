package throttle

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"
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
// redisrepo.NewFeedbackStore shares across processes. Keys are partition
// keys; ids name the Transport that calls (one per Transport).
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
	// sent (Grant.Seq > 0). It refuses until the quota's reset
	// (Grant.Spent) when the server said nothing remains, and for a moment
	// when the claims on the wire may spend what remains, or while the
	// quota is known only from answers to unclaimed requests and a claim
	// is on the wire. A key with no quota known, or whose reset has
	// passed, admits.
	Claim(ctx context.Context, key string) (Grant, error)
	// Settle records, when a request's answer came, what the answer said
	// of the quota (if q.Known) and that its claim g (if g.Seq > 0) is off
	// the wire. A later reset starts a new window; within a window the
	// count only falls, so the least said holds.
	Settle(ctx context.Context, key string, g Grant, q SharedQuota) error
	// Subscribe calls f with every Pause and Resume of any Transport
	// sharing the store (its own too), until stop is called, having first
	// called it with the pauses in force (so that a Transport that joins
	// during a pause honours it). f must not block.
	Subscribe(f func(Notice)) (stop func())
}

// Notice is what a FeedbackStore tells its subscribers.
type Notice struct {
	Key   string
	Until time.Time // the end of the pause; zero: the pause is over
}

// Grant is what FeedbackStore.Claim answers.
type Grant struct {
	Seq   int64     // the claim's number, from 1; 0: refused
	Retry time.Time // when refused: when to claim again
	Spent bool      // when refused: nothing remains until Retry, the quota's reset
}

// SharedQuota is what an answer said of its partition's tightest window
// quota.
type SharedQuota struct {
	Known     bool
	Remaining int64
	Reset     time.Time
}

// WithFeedbackStore makes the Transport share what it learns of its
// partitions through s, with every Transport using s. The Transport does
// not own s: closing the Transport leaves s open. Buckets a server names
// (partition#bucket) and paces learned from bare refusals stay local;
// the pauses they cause are shared.
func WithFeedbackStore(s FeedbackStore) Option { return func(t *Transport) { t.store = s } }

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
func (t *Transport) notice(n Notice) {
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
func (t *Transport) coordinate(ctx context.Context, g *gate, tk *ticket) (ok bool, claim Grant) {
	if !tk.probe && !g.shared.Load() {
		return true, Grant{} // a quiet partition: no call to the store
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
			return false, Grant{}
		}
	}
	if !g.shared.Load() {
		return true, Grant{}
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
	return false, Grant{}
}

// share tells the store what the answer a to a request through the
// partition's own gate g taught: a pause it began, the end of a pause (a
// probe's answer that paused nothing), the quota it reports; and settles
// the request's claim. a is nil after a transport error.
func (t *Transport) share(g *gate, tk *ticket, claim Grant, a *answer, paused time.Time) {
	var q SharedQuota
	if a != nil {
		if s, ok := tightest(a.info); ok && !a.refill && !s.Reset.IsZero() {
			q = SharedQuota{Known: true, Remaining: s.Remaining, Reset: s.Reset}
			g.shared.Store(true)
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
	if g.elsewhere && !elsewhere && g.paused {
		g.pausedUntil = until
	} else if !until.After(g.pausedUntil) {
		g.mu.Unlock()
		return
	}
	g.elsewhere = elsewhere
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
	}
	resumed := g.dispatch(time.Now())
	g.mu.Unlock()
	g.report(resumed)
}

// resumeShared ends a pause: another Transport's probe was admitted.
func (g *gate) resumeShared() {
	g.mu.Lock()
	now := time.Now()
	if g.closed || !g.paused {
		g.mu.Unlock()
		return
	}
	g.pausedUntil, g.probe, g.elsewhere = now, false, false
	resumed := g.dispatch(now)
	g.mu.Unlock()
	g.report(resumed)
}

// MemoryFeedbackStore is a FeedbackStore in memory, shared by the
// Transports of one process (and by tests and examples). What it holds of
// a key is forgotten once it no longer matters (a lease that ran out, a
// quota whose reset passed), so the keys it holds stay bounded by those
// in use. Its zero value is
// not usable: call NewMemoryFeedbackStore. It is safe for concurrent use.
type MemoryFeedbackStore struct {
	mu      sync.Mutex
	probes  map[string]lease
	pauses  map[string]time.Time // the pauses in force, told to a new subscriber
	quotas  map[string]*sharedQuota
	subs    map[int]func(Notice)
	next    int
	sweepAt int // sweep the keys when there are this many
}

// sweep forgets, once the store holds maxIdleGates keys or twice what
// survived the last sweep, the leases that ran out and the quotas whose
// reset passed with no claim on the wire. s.mu must be held.
func (s *MemoryFeedbackStore) sweep(now time.Time) {
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

// sharedQuota is a key's quota in a MemoryFeedbackStore: the least any
// answer of its window said remains, the claims made so far (seq) and
// those on the wire; exact once the answer to a claim was heard in the
// window.
type sharedQuota struct {
	SharedQuota
	seq, inflight int64
	exact         bool
}

// blind is how long a claim waits when the claims on the wire may have
// spent what remains: long enough for their answers to come back.
const blind = 20 * time.Millisecond

// claim takes a unit at now, or says when to ask again. Every claim on
// the wire counts against what remains: answers come back in any order,
// so which of them the server had counted is unknown.
func (q *sharedQuota) claim(now time.Time) Grant {
	if q.Known && now.Before(q.Reset) {
		if q.Remaining <= 0 {
			return Grant{Retry: q.Reset, Spent: true}
		}
		if q.Remaining-q.inflight <= 0 || (!q.exact && q.inflight > 0) {
			// Every Transport's first requests go out unclaimed: until the
			// answer to a claim says, one claim at a time.
			return Grant{Retry: now.Add(blind)}
		}
	}
	q.seq++
	q.inflight++
	return Grant{Seq: q.seq}
}

// settle records that claim (0: none) is off the wire and what its answer
// said of the quota: a later reset starts a new window, and within a
// window the count only falls.
func (q *sharedQuota) settle(claim int64, sq SharedQuota) {
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

// NewMemoryFeedbackStore returns an empty MemoryFeedbackStore.
func NewMemoryFeedbackStore() *MemoryFeedbackStore {
	return &MemoryFeedbackStore{
		probes: make(map[string]lease),
		pauses: make(map[string]time.Time),
		quotas: make(map[string]*sharedQuota),
		subs:   make(map[int]func(Notice)),
	}
}

var _ FeedbackStore = (*MemoryFeedbackStore)(nil)

// Pause implements FeedbackStore.
func (s *MemoryFeedbackStore) Pause(_ context.Context, key, id string, until time.Time) error {
	s.mu.Lock()
	s.sweep(time.Now())
	s.probes[key] = lease{id: id, until: until}
	s.pauses[key] = until
	s.mu.Unlock()
	s.publish(Notice{Key: key, Until: until})
	return nil
}

// Resume implements FeedbackStore.
func (s *MemoryFeedbackStore) Resume(_ context.Context, key, id string) error {
	s.mu.Lock()
	if s.probes[key].id == id {
		delete(s.probes, key)
	}
	delete(s.pauses, key)
	s.mu.Unlock()
	s.publish(Notice{Key: key})
	return nil
}

func (s *MemoryFeedbackStore) publish(n Notice) {
	s.mu.Lock()
	subs := make([]func(Notice), 0, len(s.subs))
	for _, f := range s.subs {
		subs = append(subs, f)
	}
	s.mu.Unlock()
	for _, f := range subs {
		f(n)
	}
}

// Probe implements FeedbackStore.
func (s *MemoryFeedbackStore) Probe(_ context.Context, key, id string, d time.Duration) (time.Time, error) {
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

func (s *MemoryFeedbackStore) quota(key string) *sharedQuota {
	q := s.quotas[key]
	if q == nil {
		s.sweep(time.Now())
		q = new(sharedQuota)
		s.quotas[key] = q
	}
	return q
}

// Claim implements FeedbackStore.
func (s *MemoryFeedbackStore) Claim(_ context.Context, key string) (Grant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.quota(key).claim(time.Now()), nil
}

// Settle implements FeedbackStore.
func (s *MemoryFeedbackStore) Settle(_ context.Context, key string, g Grant, sq SharedQuota) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.quota(key).settle(g.Seq, sq)
	return nil
}

// Subscribe implements FeedbackStore. f hears first of the pauses in
// force, so that a Transport that joins during a pause honours it.
func (s *MemoryFeedbackStore) Subscribe(f func(Notice)) (stop func()) {
	s.mu.Lock()
	id := s.next
	s.next++
	s.subs[id] = f
	now := time.Now()
	var force []Notice
	for k, until := range s.pauses {
		if now.Before(until) {
			force = append(force, Notice{Key: k, Until: until})
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
