package throttle

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/throttlekit/throttle/headers"
	"github.com/throttlekit/throttle/internal/waitq"
	"github.com/throttlekit/throttle/limiters"
)

// gate is one partition's model of what the server said — its quotas
// (quota.go), a pause until a reset, the probe that follows every pause,
// the pace learned from bare refusals (aimd.go), and when this server's
// whole-second resets really come (resetFor) — and the wait queue, with
// priority lanes, of the requests it holds back. Requests pass the gate
// before they take a permit from the partition's limiter.
type gate struct {
	key      string
	maxPause time.Duration // the longest one answer may pause the partition
	emit     func(Event)   // the Transport's observer, or nil

	mu    sync.Mutex
	q     *waitq.Queue // made with the first waiter (queue); nil answers as empty
	timer *time.Timer

	// A partition's own gate holds the gates of the buckets its host's
	// answers named, in a list (bucketGates), and the routes learned for
	// each (bucket.go). A bucket's gate is named by its key: its
	// partition's, "#", its name (named).
	buckets   *gate                      // a partition's gate: its first bucket's; a bucket's: the next bucket's
	routes    atomic.Pointer[routeTable] // replaced, never changed: read without g.mu
	parent    *gate                      // a bucket's partition gate, or nil
	wire      atomic.Int64               // inflight of a partition's own gate, for its buckets to read without g.mu
	flags     atomic.Uint32              // gateFlag bits: heard, shared, capped
	closed    bool
	elsewhere bool                  // the pause waits for another Transport's probe (feedback.go)
	nq        uint8                 // len(quotas), at most maxQuotas
	wave      int32                 // requests of the first wave (sent before any answer) not answered yet (waveOut)
	held      atomic.Pointer[Event] // a pause advance prolonged, for report to tell the observer

	// What the server said, each a model of its own, fed what the
	// answers say: the quotas it reports (quota.go), the pause a refusal
	// or an empty quota asks for (pause), the pace its refusals teach
	// when it advertises no quota that explains them (refusals, aimd.go),
	// and where in their second its whole-second resets fall (whole.go).
	quotas   []quota // made with the first; a slot keeps its name for good
	ver      int64   // answers with quotas applied so far
	pz       pause
	rf       cycle     // what refusals are measured against: every gate counts
	rl       *refusals // what refusals taught: nil until one does (refusals)
	ws       wholeSecond
	nextSend time.Time // pacing: the next request waits until then
	inflight int       // admitted, not yet answered
}

// gateFlag is a bit of gate.flags: what is read without g.mu.
type gateFlag uint32

const (
	heard  gateFlag = 1 << iota // an answer said something of rate limits, or refused: learn reads the clock
	shared                      // a FeedbackStore shares a quota of this partition (feedback.go)
	capped                      // at most githubMaxWire requests on the wire at once (capWire)
)

func (g *gate) is(f gateFlag) bool { return g.flags.Load()&uint32(f) != 0 }
func (g *gate) mark(f gateFlag)    { g.flags.Or(uint32(f)) }

// pause is the partition's pause: until when no request starts, and the
// probe that goes alone once it ends.
type pause struct {
	until   time.Time     // no request starts before this
	asked   bool          // a refusal (or another Transport) asked for this pause: it is never shortened
	on      bool          // a pause is in force (for the Resumed event)
	probe   bool          // the next request probes alone
	probing bool          // the probe is on the wire: hold the rest
	count   int64         // pauses begun so far
	backoff time.Duration // the pause a bare refusal begins, doubling with each refused probe
}

// cycle is what a partition's refusals are measured against, counted by
// every gate from its first request on.
type cycle struct {
	resumed  time.Time // when the last pause ended
	ok       int       // successful responses since resumed
	answered int64     // answers learned from so far
}

// refusals is what a partition's refusals teach when no quota it reports
// explains them: the pace (aimd). Most partitions are never refused: a
// gate makes it with the first refusal that needs it (refusals).
type refusals struct {
	pace       aimd
	waveStatus int           // the status of the first refusal, while the pace's wave is pending
	beside     bool          // pace was learnt beside quotas, from refusals they did not explain
	owed       time.Time     // the end of the wait a refusal asked for before any success was counted; zero: none
	owedWait   time.Duration // that wait
	measured   time.Duration // while the pace is a first refusal's guess, the step that refusal measured (firstPace); zero: none
	// A first bare refusal's wave (burstHold): when it came back, the
	// refusals of its wave counted so far (0 once its pause has ended),
	// and the end of the hold it set, while the pause is that hold.
	burstAt time.Time
	debt    int
	holdEnd time.Time
	held    int64 // pz.count of the pause that was the first burst's hold; 0: none
	// waveEnd: until when requests wait for the rest of the first
	// wave's answers, which may carry refusals (waveOut); zero: none has
	// waited. Here, not in every gate: only a partition whose first
	// requests went together waits for them.
	waveEnd time.Time
}

// refusals returns what g's refusals taught, making it on first use.
// Paths every request takes read the pace through paceStep instead, and
// leave it nil. g.mu must be held.
func (g *gate) refusals() *refusals {
	if g.rl == nil {
		g.rl = new(refusals)
	}
	return g.rl
}

// paceStep is the interval of the pace refusals taught, or 0: what
// refusals().pace.step is, without making it. g.mu must be held.
func (g *gate) paceStep() time.Duration {
	if g.rl == nil {
		return 0
	}
	return g.rl.pace.step
}

// gwaiter is a request waiting at the gate: its declared costs, and the
// ticket it got when let through.
type gwaiter struct {
	w    *waitq.Waiter
	cost *cost
	tk   ticket
}

// ticket is what enter and wait hand a request: whether it is the probe,
// its place in the order of admissions, and what it claimed of each quota.
type ticket struct {
	probe  bool
	late   bool      // its answer comes after it is settled (a stream's status): it leaves the first wave then (leaveWave)
	ver    int64     // g.ver when the request was let through
	pause  int64     // g.pz.count when the request was let through
	seen   int64     // g.rf.answered when the request was let through: 0 in the first wave
	at     time.Time // when the request was let through (zero if the gate was quiet)
	charge [maxQuotas]int64
}

// notYet is how long to wait when a quota is used up and its reset has
// already passed: servers write resets in whole seconds, rounded down, so
// "0" means "within the second", and a reset that has passed while nothing
// remains means "not yet", not "no information".
const notYet = time.Second

// queue returns the gate's wait queue, making it with the first waiter:
// most partitions never queue anyone. g.mu must be held.
func (g *gate) queue() *waitq.Queue {
	if g.q == nil {
		g.q = new(waitq.Queue)
	}
	return g.q
}

// onWire is how many requests may be spending the gate's quotas now: its
// own on the wire, and for a bucket, those its partition's gate let
// through before their bucket was known. g.mu must be held.
func (g *gate) onWire() int {
	n := g.inflight
	if g.parent != nil {
		n += int(g.parent.wire.Load())
	}
	return n
}

// storeWire publishes inflight for the partition's buckets (onWire). Only
// a partition's own gate has buckets, and until it has one nothing reads
// wire: the atomic store, a full barrier under the gate's lock on every
// request, waits for the first (bucket stores wire when it makes it).
// g.mu must be held.
func (g *gate) storeWire() {
	if g.parent == nil && g.buckets != nil {
		g.wire.Store(int64(g.inflight))
	}
}

// advance brings the gate's state up to now: a pause that has ended, window
// quotas whose reset has passed (what we knew is stale: the next request
// probes). It reports whether a pause ended. g.mu must be held.
func (g *gate) advance(now time.Time) (resumed bool) {
	if g.waveOut() {
		switch {
		case g.refusals().waveEnd.IsZero():
			// The first request to wait for the first wave's answers
			// waits for as long again as the first answers took, at
			// least waveWaitMin and at most waveWaitMax: one slow call of
			// the first wave (a long poll) holds the others back once,
			// and not for long.
			g.rl.waveEnd = now.Add(min(max(now.Sub(g.rf.resumed), waveWaitMin), waveWaitMax))
		case !now.Before(g.rl.waveEnd):
			g.wave = 0 // the stragglers are not waited for
		}
	}
	if g.pz.on && !now.Before(g.pz.until) {
		if rl := g.refusals(); rl.pace.settleWave(g.rf.ok) > 0 {
			// The first refusal ended a burst after all: hold on, for
			// what is left of the hold it would have set.
			if until := rl.burstAt.Add(rl.burstHold(g.rf.ok)); until.After(now) {
				g.pz.until, rl.holdEnd, rl.held = minTime(until, now.Add(g.maxPause)), until, g.pz.count
				g.pz.asked = true
				g.held.Store(&Event{Kind: EventPaused, Key: g.key, Until: g.pz.until, Status: rl.waveStatus})
				return false
			}
		}
		if rl := g.rl; rl.debt > 0 {
			// The first burst's hold is over, and all its wave's answers
			// are in: what the burst let through is the pace's rate.
			rl.pace.recount(g.rf.ok)
			rl.debt, rl.holdEnd = 0, time.Time{}
		}
		if !g.refusals().owed.IsZero() {
			// A refusal that asked for a wait and taught no pace, as no
			// success had been counted when it came back: the answers of
			// the wave it ended have been counted since.
			if g.rf.ok > 0 && g.refusals().pace.step == 0 {
				g.firstPace(g.refusals().owed.Sub(g.rf.resumed), g.refusals().owedWait)
			}
			g.refusals().owed = time.Time{}
		}
		g.pz.on, g.pz.asked = false, false
		g.rf.resumed, g.rf.ok = now, 0
		resumed = true
	}
	for i := range g.quotas[:g.nq] {
		if q := &g.quotas[i]; q.stale(now) {
			q.known, g.pz.probe = false, true
		}
	}
	return resumed
}

// check works out in one pass over the quotas what a request declaring c
// charges each quota the gate knows (into ch) and whether it may go now; if
// not, wake is when to look again (zero: when an answer arrives). A request
// that charges a quota more than its limit gets an error matching
// limiters.ErrExceedsLimit, naming the quota, whether or not it could go
// now. It changes nothing. g.mu must be held.
func (g *gate) check(now time.Time, c *cost, ch *[maxQuotas]int64) (ok bool, wake time.Time, err error) {
	// decided: a pause, or a probe on the wire, or a quota only an answer
	// frees, holds the request; the quotas left are only charged.
	// (A zero time is tested first: comparing a time read from the clock
	// with one that carries no monotonic reading takes the long way.)
	decided := true
	switch {
	case !g.pz.until.IsZero() && now.Before(g.pz.until):
		wake = g.pz.until
	case g.waveOut() && g.rl != nil && now.Before(g.rl.waveEnd):
		wake = g.rl.waveEnd
	case g.pz.probing:
	case g.full():
	default:
		decided, wake = false, now
		if !g.nextSend.IsZero() && now.Before(g.nextSend) {
			wake = g.nextSend
		}
	}
	wire := g.onWire()
	for i := range g.quotas[:g.nq] {
		q := &g.quotas[i]
		if !q.known {
			ch[i] = 0
			continue
		}
		n := q.charge(c)
		ch[i] = n
		if q.tooBig(n) {
			return false, time.Time{}, &ExceedsQuotaError{Partition: g.key, Quota: q.name, Cost: n, Limit: q.limit}
		}
		if decided {
			continue
		}
		if t := q.readyAt(now, n, wire); t.IsZero() {
			decided, wake = true, t
		} else if t.After(wake) {
			wake = t
		}
	}
	if decided || wake.After(now) {
		return false, wake, nil
	}
	return true, time.Time{}, nil
}

// quiet reports whether the gate has nothing that could hold a request
// back, pace it or charge it. g.mu must be held.
func (g *gate) quiet() bool {
	if g.pz.on || g.pz.probe || g.pz.probing || g.paceStep() > 0 || !g.pz.until.IsZero() || !g.nextSend.IsZero() || g.waveOut() || g.is(capped) {
		return false
	}
	return !g.hasQuotas()
}

// sent records that a request passed the gate, charging ch, and writes
// its ticket to tk. now may be zero when the gate is quiet: nothing it
// does then needs the time but the start of the first cycle. g.mu must be
// held.
func (g *gate) sent(now time.Time, c *cost, ch *[maxQuotas]int64, tk *ticket) {
	g.inflight++
	g.storeWire()
	if g.rf.resumed.IsZero() {
		if now.IsZero() {
			now = time.Now()
		}
		g.rf.resumed = now // the first cycle starts with the first request
	}
	*tk = ticket{probe: g.pz.probe, ver: g.ver, pause: g.pz.count, seen: g.rf.answered, charge: *ch, at: now}
	if g.rf.answered == 0 {
		g.wave++
	}
	if g.pz.probe {
		g.pz.probe, g.pz.probing = false, true
	}
	next, wire := g.nextSend, g.onWire()
	for i := range g.quotas[:g.nq] {
		if ch[i] == 0 {
			continue
		}
		q := &g.quotas[i]
		_, declared := c.of(q.name)
		q.claim(now, ch[i], declared)
		if d := q.pace(now, ch[i], wire); d > 0 && now.Add(d).After(next) {
			next = now.Add(d)
		}
	}
	if step := g.paceStep(); step > 0 && now.Add(step).After(next) {
		next = now.Add(step)
	}
	g.nextSend = next
}

// waveOut reports whether answers to the first wave — the requests sent
// before any answer came back — have begun to come back and some are still
// out. A request sent then, before they are all in, would go to a server
// whose word on the first wave is only half heard: the answers of one
// wave come back in any order, and the goroutines whose successes came
// first would send a second wave into the limit their siblings' refusals,
// still on the way, report (a first wave of 10 against a limit of 5 a
// second: 5 refused, and 5 more). So it waits for them, until waveEnd
// (advance). g.mu must be held.
func (g *gate) waveOut() bool { return g.wave > 0 && g.rf.answered > 0 }

// waveWaitMax bounds how long requests wait for the first wave's
// answers (advance): the answers of one wave come back within the spread
// of one round trip, not of many.
const waveWaitMax = 500 * time.Millisecond

// waveWaitMin is the least they wait: on loopback the first answers take
// a millisecond or two, and a loaded machine was seen to read the rest
// of the wave (a server's refusals among them) 15-25 ms later
// (grpcthrottle's TestServerRefusingWithRetryInfo, in a round when it
// drew 11 refusals for 6; not reproduced since, with or without this
// floor). It is paid once, by a partition's first wave.
const waveWaitMin = 50 * time.Millisecond

// waveHeld is how many requests queue only for the first wave's answers
// (waveOut): none once a pause has begun. A refusal's first guess at the
// pace counts them as on the wire, where they would be but for the wait.
// g.mu must be held.
func (g *gate) waveHeld() int {
	if g.rl == nil || g.rl.waveEnd.IsZero() || g.pz.count > 0 {
		return 0
	}
	return g.q.Len()
}

// leaveWave takes a request whose answer came late (ticket.late) out of
// the first wave when its answer comes.
func (g *gate) leaveWave() {
	g.mu.Lock()
	if g.wave > 0 {
		g.wave--
	}
	g.mu.Unlock()
}

func (g *gate) pauseUntil(until time.Time) {
	g.pz.asked = true
	g.extendPause(until)
}

// extendPause is pauseUntil for a pause a quota at zero began, which a
// later answer may bring forward (shorten). g.mu must be held.
func (g *gate) extendPause(until time.Time) {
	if until.After(g.pz.until) {
		g.pz.until = until
	}
	if !g.pz.on {
		g.pz.count++
	}
	g.pz.on, g.pz.probe = true, true
}

// enter lets the request declaring c through the gate now, writing its
// ticket to tk, or queues it at the priority ctx carries (WithPriority):
// then w is its place in the queue, to wait on with wait.
// deadline (if non-zero) is the latest the request may wait until: if the
// gate can tell its turn would come later, enter refuses it at once with a
// *limiters.RejectedError whose RetryAfter says when its turn would come.
// A request that charges a quota more than its limit fails at once with an
// *ExceedsQuotaError.
func (g *gate) enter(ctx context.Context, deadline time.Time, c *cost, tk *ticket) (w *gwaiter, err error) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil, limiters.ErrClosed
	}
	if g.q.Len() == 0 && g.quiet() {
		// Nothing learned yet that could hold this request back: no need
		// to read the clock.
		var none [maxQuotas]int64
		g.sent(time.Time{}, c, &none, tk)
		g.mu.Unlock()
		return nil, nil
	}
	now := time.Now()
	resumed := g.advance(now)
	var ch [maxQuotas]int64
	ok, _, err := g.check(now, c, &ch)
	if err != nil {
		g.mu.Unlock()
		g.report(resumed)
		return nil, err
	}
	if ok && g.q.Len() == 0 {
		g.sent(now, c, &ch, tk)
		g.mu.Unlock()
		g.report(resumed)
		return nil, nil
	}
	p := priorityOf(ctx)
	if due := g.due(now, p); !deadline.IsZero() && !due.IsZero() && due.After(deadline) {
		g.mu.Unlock()
		g.report(resumed)
		return nil, &limiters.RejectedError{
			Limiter:    "server feedback",
			RetryAfter: due.Sub(now),
			Reason:     "the server paused or paced the partition",
		}
	}
	w = &gwaiter{w: waitq.NewWaiter(1, p), cost: c}
	w.w.Value = w
	g.queue().Push(w.w)
	resumed = g.dispatch(now) || resumed
	g.mu.Unlock()
	g.report(resumed)
	return w, nil
}

// wait waits for the gate to let w through, or for ctx to end. A waiter
// whose ctx ends takes nothing with it: if it was let through at that very
// moment, the admission is undone and the next waiter may go (the race of
// go.dev/issue/63615).
func (g *gate) wait(ctx context.Context, w *gwaiter, tk *ticket) error {
	var resumed, undone bool
	err := g.q.Wait(ctx, &g.mu, w.w, func(granted, _ bool) {
		if granted {
			g.abortLocked(&w.tk)
			undone = true
		}
		resumed = g.q.Len() > 0 && g.dispatch(time.Now()) // no clock read when nobody is left to let through
	})
	if undone {
		g.freed()
	}
	g.report(resumed)
	if err != nil {
		return err
	}
	*tk = w.tk
	return nil
}

// report tells the observer that a pause ended, if one did.
func (g *gate) report(resumed bool) {
	if g.held.Load() != nil { // rare: a load, not a swap, on every answer
		if e := g.held.Swap(nil); e != nil && g.emit != nil {
			g.emit(*e)
		}
	}
	if resumed && g.emit != nil {
		g.emit(Event{Kind: EventResumed, Key: g.key})
	}
}

// due estimates when a request queued now at priority p would be let
// through: the gate's own wake time plus one pacing interval per waiter
// ahead. Zero means unknown (it waits for an answer). It changes nothing.
// g.mu must be held.
func (g *gate) due(now time.Time, p int) time.Time {
	if g.pz.probing {
		return time.Time{}
	}
	at := now
	if now.Before(g.pz.until) {
		at = g.pz.until
	}
	if at.Before(g.nextSend) {
		at = g.nextSend
	}
	exhausted := false
	for i := range g.quotas[:g.nq] {
		q := &g.quotas[i]
		if q.known && !q.refill && q.avail(now, g.onWire()) <= 0 {
			exhausted = true
			if at.Before(q.reset) {
				at = q.reset
			}
		}
	}
	ahead, _, _ := g.q.Ahead(p)
	if ahead > 0 {
		if g.pz.probe || exhausted || g.pz.until.After(now) {
			// Behind a probe: its answer decides; we cannot tell.
			return time.Time{}
		}
		step := g.paceStep()
		for i := range g.quotas[:g.nq] {
			q := &g.quotas[i]
			if a := q.avail(now, g.onWire()); q.known && !q.refill && !q.guessed && a > 0 && low(a, q.limit) {
				step = max(step, q.reset.Sub(now)/time.Duration(a+1))
			}
		}
		at = at.Add(time.Duration(ahead) * step)
	}
	return at
}

// dispatch lets waiters through from the head while the gate allows and
// arms the timer for the next look. It reports whether a pause ended. With
// nobody waiting it does nothing: the next request's enter brings the gate
// up to date (advance) when it needs to be.
// g.mu must be held.
func (g *gate) dispatch(now time.Time) (resumed bool) {
	if g.q.Len() == 0 {
		return false
	}
	resumed = g.advance(now)
	for !g.closed {
		h := g.q.Head()
		if h == nil {
			return resumed
		}
		w := h.Value.(*gwaiter)
		var ch [maxQuotas]int64
		ok, wake, err := g.check(now, w.cost, &ch)
		if err != nil {
			// Learned since it queued: the quota's limit is below its cost.
			g.q.Fail(h, err)
			continue
		}
		if !ok {
			if !wake.IsZero() {
				g.arm(wake.Sub(now))
			}
			return resumed
		}
		g.sent(now, w.cost, &ch, &w.tk)
		g.q.Grant(h)
	}
	return resumed
}

func (g *gate) arm(d time.Duration) {
	if g.timer == nil {
		g.timer = time.AfterFunc(d, g.wake)
		return
	}
	g.timer.Reset(d)
}

func (g *gate) wake() {
	g.mu.Lock()
	resumed := g.dispatch(time.Now())
	g.mu.Unlock()
	g.report(resumed)
}

// abort undoes an admission whose request was never sent.
func (g *gate) abort(tk *ticket) {
	g.mu.Lock()
	g.abortLocked(tk)
	resumed := g.dispatch(time.Now())
	g.mu.Unlock()
	g.freed()
	g.report(resumed)
}

func (g *gate) abortLocked(tk *ticket) {
	g.settle(tk)
	if tk.probe {
		g.pz.probe = true
	}
}

// settle takes a request that was let through off the books: its claims
// on the quotas and its place on the wire. g.mu must be held.
func (g *gate) settle(tk *ticket) {
	g.inflight--
	if tk.seen == 0 && !tk.late && g.wave > 0 {
		g.wave--
	}
	g.storeWire()
	for i := range g.quotas[:g.nq] {
		g.quotas[i].unclaim(tk.charge[i])
	}
	if tk.probe {
		g.pz.probing = false
	}
}

// answer is what a response says, read before the gate's lock is taken.
type answer struct {
	status int
	info   headers.Info
	cls    headers.Classification
	far    beyond
	refill bool   // its quotas refill continuously (refills)
	bucket string // the bucket its fields name (headers.ParseInto), or ""

	buf *[answerQuotas]headers.Quota // info.Quotas' array, while it has room
}

// answerQuotas is how many quotas an answer holds without allocating:
// servers report one to four.
const answerQuotas = 4

var quotaBufs = sync.Pool{New: func() any { return new([answerQuotas]headers.Quota) }}

// free gives a's buffer back, once nothing reads a.info.Quotas any more.
func (a *answer) free() {
	if a.buf != nil {
		*a.buf = [answerQuotas]headers.Quota{} // holds no header's strings
		quotaBufs.Put(a.buf)
		a.buf = nil
	}
}

// parseInto is headers.Parse appending to a buffer of the caller's
// (headers.ParseInto): the Transport parses every answer with quotas, and
// the slice Parse returns, which the caller owns, would be allocated
// each time.
var parseInto = headers.ParseInto

// read reads what resp says into a; body is what headers.PeekBody peeked
// of it (nil when nothing was). a.info.Quotas may share a's own array: a
// is not to be copied while they are used.
func (a *answer) read(resp *http.Response, body []byte, now time.Time) {
	a.status = resp.StatusCode
	a.buf = quotaBufs.Get().(*[answerQuotas]headers.Quota)
	a.info, a.bucket = parseInto(a.buf[:0], resp.Header, now)
	if a.status >= 400 {
		a.cls = headers.Classify(a.status, resp.Header, body)
	}
	if saysStop(a.status, a.info) {
		a.far = farHints(resp.Header, now)
	}
	if len(a.info.Quotas) > 0 {
		a.refill = refills(resp.Header, a.info.Quotas)
	}
}

// doneQuiet settles a success that says nothing of rate limits, if the
// gate is quiet and nobody waits: then nothing done does needs the time.
// It reports whether it did; if not, the caller reads the clock and calls
// done.
func (g *gate) doneQuiet(tk *ticket) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.q.Len() > 0 || !g.quiet() {
		return false
	}
	g.settle(tk)
	g.pz.backoff = 0
	g.rf.ok++
	g.rf.answered++
	return true
}

// done learns from the answer to a request the gate let through (a is
// nil after a transport error). It returns the end of a pause the answer
// began, or zero.
func (g *gate) done(tk *ticket, a *answer, now time.Time) time.Time {
	g.mu.Lock()
	g.settle(tk)
	var paused time.Time
	if a != nil {
		paused = g.learn(tk, a, now)
	}
	resumed := g.dispatch(now)
	g.mu.Unlock()
	g.freed()
	if !paused.IsZero() && g.emit != nil {
		g.emit(Event{Kind: EventPaused, Key: g.key, Until: paused, Status: a.status})
	}
	g.report(resumed)
	return paused
}

// limited reports whether a says "stop": a 429 or a rate-limit signal
// (GitHub's 403s), or a 503 that says when to come back.
func (a *answer) limited() bool {
	return a.status == http.StatusTooManyRequests || a.cls.Signal == headers.RateLimited ||
		(a.status == http.StatusServiceUnavailable && (a.info.HasRetryAfter || a.far.retry))
}

// learn applies what an answer says. It returns the end of a pause it
// started, or zero. g.mu must be held.
//
// A final refusal (a quota exhausted for good, a request too large) teaches
// nothing and pauses nothing. A refusal that says when (Retry-After, a
// quota at zero, GitHub's documented minute) pauses until then; one that
// says nothing (a bare 429 or 503, an overloaded 529) slows the pace
// (aimd) and pauses for one step of it, doubling with each refused probe
// — or, when it ends a first burst, for the hold aimd.refused asks. A
// hint beyond the horizon still says "stop": a refusal that carries one,
// or a quota at zero whose reset is one, pauses the partition for
// maxPause.
func (g *gate) learn(tk *ticket, a *answer, now time.Time) time.Time {
	g.rf.answered++
	if a.cls.Signal.Final() {
		return time.Time{}
	}
	fresh := tk.pause == g.pz.count // sent since the last pause began
	limited := a.limited()
	if limited || a.cls.Signal == headers.Overloaded {
		d := max(g.ws.delay(a.info, now), a.cls.MinWait)
		if a.far.any() {
			d = g.maxPause
		}
		// A wait the refusal asked for is kept, whatever else is known
		// (a sliding window's pace would free a request sooner) and
		// whatever other answers say meanwhile: pauseUntil only extends.
		g.learnQuotas(tk, a, now)
		if d > 0 {
			g.tighten(a, now.Add(d))
			until := now.Add(min(d, g.maxPause))
			if fresh && !a.far.any() && !g.rf.resumed.IsZero() && g.unexplained() {
				g.teach(tk, until, d, now)
			}
			g.pauseUntil(until)
			return g.pz.until
		}
		if !fresh {
			// Sent before the pause this answer's siblings began: it tells
			// us nothing new, and must not compound the backoff — but a
			// server that counts it holds it against us (burstHold).
			if g.rl != nil && g.rl.debt > 0 && tk.pause == g.pz.count-1 {
				g.rl.debt++
				g.rehold()
			}
			return time.Time{}
		}
		first := g.paceStep() == 0
		hold := g.refusals().pace.refused(now, g.rf.resumed, g.rf.ok, g.inflight+1+g.waveHeld(), g.afterAnswers(tk))
		burst := hold == aimdHold
		if first {
			g.rl.burstAt, g.rl.debt = now, 1
			if burst {
				hold = g.rl.burstHold(g.rf.ok)
			}
		}
		if a.info.HasRetryAfter && hold > aimdSpan {
			// "Retry-After: 0" (koa-ratelimit truncates the wait to whole
			// seconds): the server says its window ends within the
			// second, and puts no debt beyond it.
			hold = aimdSpan
		}
		g.refusals().waveStatus = a.status
		g.refusals().pace.step = min(g.refusals().pace.step, g.maxPause)
		g.pz.backoff = min(max(2*g.pz.backoff, g.refusals().pace.step, hold), g.maxPause)
		if tk.probe && g.rl.held != 0 && tk.pause == g.rl.held {
			// The probe after a first burst's hold, refused: the window
			// is longer than the hold took it to be, or the server's
			// debt larger. Wait out the two windows of aimdHold from the
			// burst, not twice the hold: the likeliest length of a
			// window is still a second or two.
			g.pz.backoff = min(g.pz.backoff, max(g.rl.burstAt.Add(aimdHold+g.rl.pace.step).Sub(now), g.rl.pace.step))
		}
		g.pauseUntil(now.Add(g.pz.backoff))
		if first && burst && hold > aimdSpan {
			g.rl.holdEnd, g.rl.held = g.pz.until, g.pz.count
		}
		return g.pz.until
	}
	if a.status < 400 {
		g.pz.backoff = 0
		g.rf.ok++
		if g.rl != nil && !g.rl.holdEnd.IsZero() {
			g.rehold()
		}
		if fresh && g.rl != nil {
			g.refusals().pace.succeeded(now, tk.at)
		}
	}
	return g.learnQuotas(tk, a, now)
}

// afterAnswers reports whether the server may have counted requests sent
// after answers came back before the refused request tk: it was one of
// them, or it was of the first wave and some on the wire now are not (the
// first wave's answers were waited for, and the next requests went, while
// it was still on its way: a connection set up last on a loaded machine
// reaches the server behind them). A refusal within a first wave that
// nothing overtook says the server's burst is smaller than the wave; one
// that may have been overtaken says no such thing (aimd.refused). tk is
// settled. g.mu must be held.
func (g *gate) afterAnswers(tk *ticket) bool {
	return tk.seen > 0 || g.inflight > int(g.wave)
}

// burstHold is how long a first bare refusal that ended a burst holds
// the partition, from burstAt, when ok requests of the burst got
// through and debt of its wave were refused: the window the burst
// emptied (aimdSpan), and as much of the next as a server that counts
// refusals holds against us, and a step of the pace to spare; at most
// aimdHold, two whole windows. A server that carries what was refused
// over into the next window (apisim's penalty window; OpenAI warns that
// "unsuccessful requests contribute to your per-minute limit") starts
// it with debt of its ok spent: debt/ok of it, at the burst's rate. One
// that weighs the last window into a sliding estimate of its rate
// (HAProxy's http_req_rate) needs less, debt/(ok+debt) of it.
func (r *refusals) burstHold(ok int) time.Duration {
	debt := aimdSpan * time.Duration(r.debt) / time.Duration(max(ok, 1))
	return min(aimdSpan+debt+r.pace.step, aimdHold)
}

// rehold moves the end of a first burst's hold (refusals.holdEnd) to
// what the answers of its wave counted so far make it, unless something
// else has moved the pause since. g.mu must be held.
func (g *gate) rehold() {
	rl := g.rl
	if !g.pz.on || rl.holdEnd.IsZero() || !g.pz.until.Equal(rl.holdEnd) {
		return
	}
	until := rl.burstAt.Add(rl.burstHold(g.rf.ok))
	g.pz.until, rl.holdEnd = until, until
}

// teach lets a refusal that asked for a wait of d, until until, and that
// no quota at zero explains — a limit the server does not advertise —
// pace the partition, searched on from there (aimd): the Retry-After sets
// the pause, never the pace. tk is the refused request's. g.mu must be
// held.
func (g *gate) teach(tk *ticket, until time.Time, d time.Duration, now time.Time) {
	switch {
	case g.refusals().pace.step == 0:
		// The pace is set when the pause ends, from all that the wave
		// got through (advance): answers that come back together are
		// counted in any order, and this refusal may be counted before
		// most of its wave's successes (a stream's are counted when its
		// first message is read: 2 of 5 and a pace of 500 ms, for a
		// server that takes 5 a second, on a loaded machine).
		owed := until
		if !tk.at.IsZero() && tk.at.Add(d).Before(owed) {
			// Measured from sendings, the way there cancels out.
			owed = tk.at.Add(d)
		}
		g.refusals().owed, g.refusals().owedWait = owed, d
	case g.rf.ok == 0:
	case g.refusals().measured > 0:
		// The second refusal of a limit the server keeps beside the
		// quotas it advertises: the first pace was a guess (firstPace),
		// now measured as a server that says when to come back is. Each
		// refusal bounds the window — no longer than the run it let
		// through and the wait it asked for, as a window that frees
		// when the wait ends would be — and the tightest bound is the
		// fastest safe pace: the first's, a burst, unless this run's is
		// tighter.
		step := g.refusals().measured
		g.refusals().measured = 0
		if !tk.at.IsZero() { // rf.ok > 0: the case above
			step = min(step, tk.at.Add(d).Sub(g.rf.resumed)/time.Duration(g.rf.ok))
		}
		g.refusals().pace.measured(min(step, g.maxPause), d)
	default:
		g.refusals().pace.refused(now, g.rf.resumed, g.rf.ok, g.inflight+1, g.afterAnswers(tk))
		g.refusals().pace.step = min(g.refusals().pace.step, g.maxPause)
		g.refusals().pace.penalty = d
		if g.refusals().beside = g.hasQuotas(); g.refusals().beside {
			g.refusals().pace.tight = 0 // back to the last rate a run got through at: each probe costs a penalty
		}
		// A wait told finer than the second (a time to the window's end,
		// not a rounded or constant Retry-After) that ends a whole number
		// of seconds after the last pause ended marks a fixed window:
		// the server took ok requests in the window from the end of the
		// last pause to until, and will take no more. A pace faster
		// than that is refused again in the next window, so it starts
		// there, as the first refusal's did. (The first refusal's span
		// began at our first request, maybe late in a window, and may
		// overstate the rate; this one is a whole window.) The window
		// began where the last pause was to end, not where the gate
		// noticed (rf.resumed, later on a loaded machine); and it lasts
		// the whole seconds the span is near: each end of the span is
		// late by the way back of its answer, and by how long a loaded
		// machine took to learn it, which differ.
		from := g.rf.resumed
		if !g.pz.until.IsZero() && g.pz.until.Before(from) {
			from = g.pz.until
		}
		if span := until.Sub(from); d%time.Second != 0 && wholeWindows(span) {
			if w := span.Round(time.Second); w/time.Duration(g.rf.ok) > g.refusals().pace.step {
				g.startPace(w, d)
			}
		}
	}
}

// wholeWindows reports whether span, between the ends of two waits a
// server asked for, is a whole number of seconds, to within
// windowDoubt: windows are configured in whole seconds.
func wholeWindows(span time.Duration) bool {
	off := (span + windowDoubt) % time.Second
	return span >= time.Second-windowDoubt && off <= 2*windowDoubt
}

// windowDoubt is how far from a whole second the span between the ends
// of two waits may be and still be read as whole windows: each end is
// the wait the server told plus the way back of its answer, which
// varies by the jitter of the round trip.
const windowDoubt = 50 * time.Millisecond

// firstPace starts the pace from the first refusal that asked for a
// wait of d: the server took rf.ok requests over span, from the end of
// the last pause to the end of that wait. Read as a window that ends
// with the wait, that is the rate (startPace). But a limit a server keeps
// beside the quotas it advertises (GitHub's secondary limits) asks for a
// wait that is a penalty, not the rest of a window: when the run it let
// through came in well under a second and the wait is longer than that,
// the pace is the run's size per second, as a bare refusal that ends a
// burst teaches (aimd.refused), and a second refusal measures it
// (teach). g.mu must be held.
func (g *gate) firstPace(span, d time.Duration) {
	if run := span - d; g.hasQuotas() && run < aimdSpan && d > aimdSpan && d <= guessWaitMax && g.rf.ok >= aimdSamples {
		step := time.Duration(float64(aimdSpan/time.Duration(g.rf.ok)) * aimdCut)
		g.refusals().pace.measured(step, d)
		g.refusals().beside = true
		g.refusals().measured = min(span/time.Duration(g.rf.ok), g.maxPause)
		return
	}
	g.startPace(span, d)
}

// guessWaitMax is the longest wait after which firstPace guesses: a
// wait of a minute (GitHub's documented one, and its secondary limit of
// 900 points a minute) speaks of a window of minutes, which the run and
// the wait measure, and a wrong guess would cost a wait that long.
const guessWaitMax = 10 * time.Second

// startPace starts the pace at how many requests the server took (ok,
// counted since the last pause ended) over span, from the last pause's
// end to the end of the wait of d a refusal asked for. g.mu must be held.
func (g *gate) startPace(span, d time.Duration) {
	g.refusals().pace.measured(min(span/time.Duration(g.rf.ok), g.maxPause), d)
	g.refusals().beside = g.hasQuotas()
}

// tighten brings the reset of each quota a refusal a says is at zero
// forward to until, the end of the wait the refusal asked for, when that
// is earlier by less than the second a reset written in whole seconds
// rounds away (delay read the two together). g.mu must be held.
func (g *gate) tighten(a *answer, until time.Time) {
	for i := range a.info.Quotas {
		s := &a.info.Quotas[i]
		if s.Remaining != 0 {
			continue
		}
		for j := range g.quotas[:g.nq] {
			q := &g.quotas[j]
			if q.name == s.Name && q.known && !q.refill && q.reset.After(until) && q.reset.Sub(until) <= time.Second+resetSlack {
				q.reset = until
			}
		}
	}
}

// twins reads each reset of qs, an answer's quotas read at now, by the
// tightest bound the answer gives: a quota written in whole seconds (the
// IETF t, X-RateLimit-Reset) that has a twin in the same answer — the same
// limit and remaining, written by a server that sends both forms — whose
// reset is finer (X-RateLimit-Reset-After, to the millisecond) and falls
// within the second the whole one rounds up, ends at the twin's.
func twins(qs []headers.Quota, now time.Time) {
	for i := range qs {
		q := &qs[i]
		if q.Reset.IsZero() || q.Remaining < 0 || !wholeSeconds(q.Reset, now) {
			continue
		}
		for j := range qs {
			t := &qs[j]
			if j != i && t.Limit == q.Limit && t.Remaining == q.Remaining && !t.Reset.IsZero() &&
				!wholeSeconds(t.Reset, now) && !t.Reset.After(q.Reset) && t.Reset.After(q.Reset.Add(-time.Second-resetSlack)) {
				q.Reset = t.Reset
			}
		}
	}
}

// unexplained reports whether a refusal that asked for a wait teaches a
// pace: the server advertises no quota, or it does but refused while its
// quotas had room — a limit it keeps to itself (GitHub's secondary
// limits). g.mu must be held.
func (g *gate) unexplained() bool {
	for i := range g.quotas[:g.nq] {
		if q := &g.quotas[i]; q.known && !q.concurrent() && q.rmin <= 0 {
			return false // a quota at zero explains it
		}
	}
	return true
}

// learnQuotas applies the quotas an answer reports. It returns the end of
// a pause a quota at zero started, or zero. g.mu must be held.
func (g *gate) learnQuotas(tk *ticket, a *answer, now time.Time) time.Time {
	if tk.probe && g.ws.reset != 0 && a.status < 400 {
		g.ws.learn(a, now)
	}
	twins(a.info.Quotas, now)
	var until time.Time
	learned := false
	for i := range a.info.Quotas {
		s := &a.info.Quotas[i]
		if s.Remaining < 0 && s.Unit != "concurrent-requests" {
			continue
		}
		q := g.slot(s.Name)
		if q == nil {
			continue
		}
		reset, guessed := s.Reset, false
		if a.refill && !reset.IsZero() {
			reset = g.within(reset, now)
		}
		if !a.refill {
			reset = g.ws.resetFor(s, now)
			if s.Remaining == 0 {
				// The server's reset has passed while nothing remains:
				// resetFor's answer is when to probe again, a guess.
				guessed = !s.Reset.IsZero() && !s.Reset.After(now)
				if reset.IsZero() {
					if !a.far.reset {
						continue
					}
					reset = now.Add(g.maxPause)
				}
			} else if !reset.IsZero() && !reset.After(now) {
				// Some remain, but the reset is stale or rounded down to
				// nothing: trust the count for a moment, then probe again.
				reset, guessed = now.Add(notYet), true
			}
			if !reset.IsZero() {
				reset = g.within(reset, now)
			}
		}
		if reset.IsZero() && !a.refill && s.Unit != "concurrent-requests" {
			// Without a reset the count cannot be paced or trusted for long.
			q.known = false
			continue
		}
		// Within a window the server's count only grows, so an answer to a
		// request sent before the answer we last learned from may be
		// stale: apply keeps the least remaining. An answer to a request
		// sent after it is fresher (a window may have ended, a bucket
		// refilled): believe it. Every request still on the wire may be
		// missing from the count, so avail subtracts their claims; one that
		// was counted comes back and gives its claim back.
		sent := tk.at
		if sent.IsZero() {
			sent = g.rf.resumed // let through by a quiet gate: after its first request
		}
		q.apply(s, a.refill, !q.known || tk.ver >= q.ver, reset, guessed, g.ver+1, sent, now)
		if q.sliding() && tk.pause == g.pz.count {
			// Sent since the last pause began: a success or a refusal
			// moves the search for a sliding log's slack.
			switch {
			case a.status < 400:
				q.slide(false)
			case a.limited() || a.cls.Signal == headers.Overloaded:
				q.slide(true)
			}
		}
		learned = true
		if s.Remaining == 0 && !q.refill {
			// A window at zero: nothing before its reset. (A refilling
			// quota at zero only waits for what refills: readyAt.)
			until = maxTime(until, q.reset)
		}
	}
	if learned {
		g.ver++
		if a.status < 400 && g.rl != nil && !g.rl.beside {
			// The server has started to advertise its quotas: they
			// pace the partition now.
			g.rl.pace = aimd{}
		}
	}
	if !until.IsZero() {
		g.extendPause(until)
		return g.pz.until
	}
	if learned && a.status < 400 && g.pz.on {
		g.shorten(now)
	}
	return time.Time{}
}

// shorten brings a pause that quotas at zero began forward to the latest
// of their resets, once later answers have tightened those (the answer
// to the request that opened a window, come back after the one that
// emptied it, tells when the window opened: span), unless a refusal
// asked for the pause too. g.mu must be held.
func (g *gate) shorten(now time.Time) {
	if !g.pz.on || g.pz.asked || !g.pz.until.After(now) {
		return
	}
	var z time.Time
	for i := range g.quotas[:g.nq] {
		if q := &g.quotas[i]; q.known && !q.refill && !q.concurrent() && q.rmin <= 0 {
			z = maxTime(z, q.reset)
		}
	}
	if !z.IsZero() && z.Before(g.pz.until) {
		g.pz.until = z
	}
}

// within is t, or the horizon now+maxPause if t lies beyond it: no reset
// is trusted further ahead. Whole seconds are compared first: adding to a
// time read from the clock, and comparing it with one parsed from a
// header, cost more than most resets, well within, need.
func (g *gate) within(t, now time.Time) time.Time {
	if t.Unix() < now.Unix()+int64(g.maxPause/time.Second)-1 {
		return t
	}
	return minTime(t, now.Add(g.maxPause))
}

// hasQuotas reports whether the gate follows any quota. g.mu must be held.
func (g *gate) hasQuotas() bool {
	for i := range g.quotas[:g.nq] {
		if g.quotas[i].known {
			return true
		}
	}
	return false
}

// slot returns the quota named name, taking a free slot for a new one, or
// nil when every slot is taken. g.mu must be held.
func (g *gate) slot(name string) *quota {
	for i := range g.quotas[:g.nq] {
		if g.quotas[i].name == name {
			return &g.quotas[i]
		}
	}
	if g.nq == maxQuotas {
		return nil
	}
	g.quotas = append(g.quotas, quota{name: name, limit: -1}) // most servers report one or two
	g.nq++
	return &g.quotas[g.nq-1]
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// neutral reports whether the gate holds nothing worth remembering,
// nor do its buckets' gates. g.mu must be held.
func (g *gate) neutral(now time.Time) bool {
	for b := range g.bucketGates {
		b.mu.Lock() // a partition's gate, then its buckets': as close does
		n := b.neutral(now)
		b.mu.Unlock()
		if !n {
			return false
		}
	}
	if g.q.Len() > 0 || g.inflight > 0 || g.pz.probing || g.pz.until.After(now) || g.paceStep() > 0 || g.ws.phase > 0 {
		return false
	}
	for i := range g.quotas[:g.nq] {
		if q := &g.quotas[i]; q.known && (q.refill || q.concurrent() || now.Before(q.reset)) {
			return false
		}
	}
	return true
}

func (g *gate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	g.closed = true
	for b := range g.bucketGates {
		b.close()
	}
	for h := g.q.Head(); h != nil; h = g.q.Head() {
		g.q.Fail(h, limiters.ErrClosed)
	}
	if g.timer != nil {
		g.timer.Stop()
	}
}
