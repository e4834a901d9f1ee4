package throttle

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/throttlekit/throttle/internal/waitq"
	"github.com/throttlekit/throttle/limiters"
)

// gate is one partition's gate: the dispatcher of the wait queue, with
// priority lanes, of the requests it holds back (dispatch), and its
// model of the server (model), fed what each answer says with when its
// request left and when it came back. Requests pass the gate before they
// take a permit from the partition's limiter.
//
// A partition's own gate holds the gates of the buckets its host's
// answers named (family), each a gate of its own.
type gate struct {
	key      string
	maxPause time.Duration // the longest one answer may pause the partition
	emit     func(Event)   // the Transport's observer, or nil

	dispatcher
	family
	model

	flags atomic.Uint32 // gateFlag bits: heard, shared, capped, timed, longWay, spans, scoutGate
	// trip is how long after the first request the first answer came
	// back, in microseconds (in the four bytes flags leaves; g.mu): a
	// round trip (the first answer's, if it was the first request's; a
	// little more otherwise). It dates the requests a quiet gate let
	// through without reading the clock (sentAt; read as firstTrip).
	trip int32
	held atomic.Pointer[Event] // a pause advance prolonged, for report to tell the observer
}

// dispatcher is a gate's dispatcher: the queue of requests it holds back,
// the timer that wakes them, and the requests it let through.
type dispatcher struct {
	mu       sync.Mutex   // guards the gate, but for what is atomic
	q        *waitq.Queue // made with the first waiter (queue); nil answers as empty
	timer    *time.Timer
	nextSend time.Time // pacing: the next request waits until then
	inflight int       // admitted, not yet answered
	wave     int32     // requests of the first wave (sent before any answer) not answered yet (waveOut)
	waveCap  uint8     // the most the first wave may be, if fewer than waveMax (discordTwin); 0: waveMax
	closed   bool
}

// family is how a gate stands among its partition's: a partition's own
// gate holds the gates of the buckets its host's answers named, in a list
// (bucketGates), and the routes learned for each (bucket.go). A bucket's
// gate is named by its key: its partition's, "#", its name (named).
type family struct {
	buckets *gate                      // a partition's gate: its first bucket's; a bucket's: the next bucket's
	routes  atomic.Pointer[routeTable] // replaced, never changed: read without g.mu
	parent  *gate                      // a bucket's partition gate, or nil
	wire    atomic.Int64               // inflight of a partition's own gate, for its buckets to read without g.mu
}

// model is what the server said, each part a model of its own, fed what
// the answers say: the quotas it reports (quota.go), the pause a refusal
// or an empty quota asks for (pause), the pace its refusals teach when it
// advertises no quota that explains them (traits, aimd.go), and where in
// their second its whole-second resets fall (whole.go).
type model struct {
	quotas []quota // made with the first, at most maxQuotas; a slot keeps its name for good
	ver    int64   // answers with quotas applied so far
	pz     pause
	rf     cycle   // what refusals are measured against: every gate counts
	rl     *traits // what the server was found to do beyond its quotas: nil until needed (traits)
	ws     wholeSecond
}

// gateFlag is a bit of gate.flags: what is read without g.mu.
type gateFlag uint32

const (
	heard     gateFlag = 1 << iota // an answer said something of rate limits, or refused: learn reads the clock
	shared                         // a FeedbackStore shares a quota of this partition (feedback.go)
	capped                         // at most githubMaxWire requests on the wire at once (capWire)
	timed                          // the gate has traits (g.rl) or has held a send back (nextSend): its sends are timed to the clock (enter)
	longWay                        // every answer is learned the long way, count's short way never taken (TestCountMatchesApply's reference)
	spans                          // a partition's gate that its buckets' requests pass too: the host has a limit over all its buckets (discord.go)
	scoutGate                      // a scout's gate (scout): its requests are on its partition's wire
)

func (g *gate) is(f gateFlag) bool { return g.flags.Load()&uint32(f) != 0 }
func (g *gate) mark(f gateFlag)    { g.flags.Or(uint32(f)) }

// pause is the partition's pause: until when no request starts, and the
// probe that goes alone once it ends.
type pause struct {
	until   time.Time // no request starts before this
	asked   bool      // a refusal (or another Transport) asked for this pause: it is never shortened
	on      bool      // a pause is in force (for the Resumed event)
	probe   bool      // the next request probes alone
	probing bool      // the probe is on the wire: hold the rest
	// elsewhere: the pause waits for another Transport's probe
	// (feedback.go).
	elsewhere bool
	count     int64         // pauses begun so far
	backoff   time.Duration // the pause a bare refusal begins, doubling with each refused probe
}

// cycle is what a partition's refusals are measured against, counted by
// every gate from its first request on.
type cycle struct {
	resumed  time.Time // when the last pause ended
	ok       int       // successful responses since resumed
	answered int64     // answers learned from so far
}

// traits is what a partition's server was found to do beyond what its
// quotas say: the pace its refusals teach when no quota explains them
// (aimd), a first refused burst's hold, the first wave's ramp, the
// sends a sliding log's window is read from, a window every request
// restarts, and the round trip. A partition whose server advertises its
// quotas and never refuses never needs it: a gate makes it with the
// first answer or wave that does (traits).
type traits struct {
	pace         aimd
	waveStatus   int           // the status of the first refusal, while the pace's wave is pending
	beside       bool          // pace was learnt beside quotas, from refusals they did not explain
	owed         time.Time     // the end of the wait a refusal asked for before any success was counted; zero: none
	owedWait     time.Duration // that wait
	owedBare     bool          // and that refusal carried no quota's fields
	owedWave     bool          // and it was of the first wave: owed is read from its answer
	measured     time.Duration // while the pace is a first refusal's guess, the step that refusal measured (firstPace); zero: none
	refusedSince time.Time     // when a probe was first refused since the last success (refusedLong); zero: none
	burst        burstState
	turn         turn // a bare server's window, as its refusals bound it
	ramp         rampState
	// sends: the partition's last sends, for a sliding log's window
	// (sendlog.go); nil until a quota is found to slide.
	sends   *sendLog
	restart restartState
	// rtt is the round trip of the answers since the first refusal, as
	// TCP keeps it: its spread is the jitter the pace leaves room for
	// (paceInterval).
	rtt roundTrip
}

// burstState is a first bare refusal's wave (burstHold): when it came
// back, the refusals of its wave counted so far (0 once its pause has
// ended), and the end of the hold it set, while the pause is that hold.
type burstState struct {
	at      time.Time
	debt    int
	holdEnd time.Time
	held    int64 // pz.count of the pause that was the first burst's hold; 0: none
}

// rampState is the first wave's: waveEnd, until when requests wait for
// the rest of its answers, which may carry refusals (waveOut; zero: none
// has waited; here, not in every gate: only a partition whose first
// requests went together waits for them); and after a first wave that
// all succeeded in silence, the batches doubling from one that the
// requests that waited for it go in (the gate's ramp): the size of the
// batch (0: no ramp), its places not yet taken, its requests not yet
// answered, until when it is waited for, how long that is after its last
// request went, and the first wave's size, where the ramp ends.
type rampState struct {
	waveEnd         time.Time
	size, left, out int
	end             time.Time
	wait            time.Duration
	top             int
}

// restartState is what the gate keeps once a quota is found to be a
// window every request restarts (on; quota.restarts): when the last
// request let through reached the server, at the latest (its answer's
// arrival; gate.restarted).
type restartState struct {
	lastHit time.Time
	on      bool
}

// roundTrip is a smoothed round trip and its mean deviation (RFC 6298).
type roundTrip struct {
	srtt, rttvar time.Duration
}

// sample applies a round trip r.
func (t *roundTrip) sample(r time.Duration) {
	if t.srtt == 0 {
		t.srtt, t.rttvar = r, r/2
		return
	}
	t.rttvar += ((t.srtt - r).Abs() - t.rttvar) / 4
	t.srtt += (r - t.srtt) / 8
}

// jitter is how much later than the others a request may reach the
// server: four mean deviations of the round trip (RFC 6298's margin), at
// most jitterMax.
func (t *roundTrip) jitter() time.Duration { return min(4*t.rttvar, jitterMax) }

// spread is how much later than the next request an earlier one may
// have reached the server: six mean deviations of the round trip (four
// are the whole spread of a way that varies evenly), uncapped, but no
// more than a round trip (neither way takes longer).
func (t *roundTrip) spread() time.Duration { return min(6*t.rttvar, t.srtt) }

// jitterMax bounds the jitter the pace leaves room for: a round trip
// also varies with the server's work (a server that holds a request
// until its slot, a slow call), which the way there does not.
const jitterMax = 20 * time.Millisecond

// firstTrip is trip as a duration; 0 until the first answer. g.mu must be
// held.
func (g *gate) firstTrip() time.Duration { return time.Duration(g.trip) * time.Microsecond }

// traits returns what g found its server to do beyond its quotas,
// making it on first use. Paths every request takes read the pace
// through paceStep instead, and leave it nil. g.mu must be held.
func (g *gate) traits() *traits {
	if g.rl == nil {
		g.rl = new(traits)
		g.mark(timed)
	}
	return g.rl
}

// paceStep is the interval of the pace refusals taught, or 0: what
// traits().pace.step is, without making it. g.mu must be held.
func (g *gate) paceStep() time.Duration {
	if g.rl == nil {
		return 0
	}
	return g.rl.pace.step
}

// paceInterval is how long after a request the pace holds the next: a
// step of the pace, and room for the jitter of the way there. A window
// that takes n requests a second is paced at n a second only if the
// requests reach it as evenly as they left: one that arrives late and
// the next early put n+1 in a second, and at the plateau (half a
// percent under the rate) ±10 ms of jitter did, once in a run. So the
// interval grows by the jitter's share of a second (a window's usual
// length): one percent for 10 ms. g.mu must be held.
func (g *gate) paceInterval() time.Duration {
	step := g.paceStep()
	if step == 0 {
		return 0
	}
	return step + time.Duration(float64(step)*float64(g.rl.rtt.jitter())/float64(aimdSpan))
}

// gwaiter is a request waiting at the gate: its declared costs, and the
// ticket it got when let through.
type gwaiter struct {
	w        *waitq.Waiter
	cost     *cost
	deadline time.Time // the latest it may wait until (enter), or zero
	tk       ticket
}

// ticket is what enter and wait hand a request: whether it is the probe,
// its place in the order of admissions, and what it claimed of each quota.
type ticket struct {
	probe  bool
	ramp   bool      // sent in a batch of the ramp after a silent first wave (traits.ramp)
	seq    uint32    // its place in the send log (traits.sends), or 0
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
// through before their bucket was known — unless that gate spans its
// buckets: then most it let through are theirs, counted in their gates.
// g.mu must be held.
func (g *gate) onWire() int {
	n := g.inflight
	if g.parent != nil && !g.parent.is(spans) {
		n += int(g.parent.wire.Load())
	}
	return n
}

// storeWire publishes a change d of inflight for the partition's buckets
// (onWire): a partition's own gate's, and a scout's (scout), whose
// requests are its partition's until their bucket is known. Only a
// partition's own gate has buckets, and until it has one nothing reads
// wire: the atomic add, a full barrier under the gate's lock on every
// request, waits for the first (bucket stores wire when it makes it).
// g.mu must be held.
func (g *gate) storeWire(d int64) {
	switch {
	case g.parent == nil && g.buckets != nil:
		g.wire.Add(d)
	case g.parent != nil && g.is(scoutGate):
		g.parent.wire.Add(d)
	}
}

// advance brings the gate's state up to now: a pause that has ended, window
// quotas whose reset has passed (what we knew is stale: the next request
// probes). It reports whether a pause ended. g.mu must be held.
func (g *gate) advance(now time.Time) (resumed bool) {
	if g.waveOut() {
		switch {
		case g.traits().ramp.waveEnd.IsZero():
			// The first request to wait for the first wave's answers
			// waits for as long again as the first answers took, at
			// least waveWaitMin and at most waveWaitMax: one slow call of
			// the first wave (a long poll) holds the others back once,
			// and not for long. Answers of the wave that are still
			// coming extend it (waveAnswered).
			g.rl.ramp.waveEnd = now.Add(min(max(now.Sub(g.rf.resumed), waveWaitMin), waveWaitMax))
		case !now.Before(g.rl.ramp.waveEnd):
			g.wave = 0 // the stragglers are not waited for
			g.ramp(now)
		}
	}
	if g.pz.on && !now.Before(g.pz.until) {
		if rl := g.traits(); rl.pace.settleWave(g.rf.ok) > 0 {
			// The first refusal ended a burst after all: hold on, for
			// what is left of the hold it would have set.
			if until := rl.burst.at.Add(rl.burstHold(g.rf.ok)); until.After(now) {
				g.pz.until, rl.burst.holdEnd, rl.burst.held = minTime(until, now.Add(g.maxPause)), until, g.pz.count
				g.pz.asked = true
				g.held.Store(&Event{Kind: EventPaused, Key: g.key, Until: g.pz.until, Status: rl.waveStatus})
				return false
			}
		}
		if rl := g.rl; rl.burst.debt > 0 {
			// The first burst's hold is over, and all its wave's answers
			// are in: what the burst let through is the pace's rate.
			rl.pace.recount(g.rf.ok)
			rl.burst.debt, rl.burst.holdEnd = 0, time.Time{}
		}
		if rl := g.traits(); !rl.owed.IsZero() {
			// A refusal that asked for a wait and taught no pace, as no
			// success had been counted when it came back: the answers of
			// the wave it ended have been counted since.
			if g.rf.ok > 0 && rl.pace.step == 0 {
				span, d := rl.owed.Sub(g.rf.resumed), rl.owedWait
				if trip := g.firstTrip(); rl.owedWave && g.rf.ok == 1 && g.inflight == 0 && trip > 0 && d < aimdSpan && span-trip > d {
					// One request of the first wave got through (and
					// none is still on its way: a stream's success is
					// counted when its first message is read), and
					// the wait a refusal of it told is the next free
					// place: a bucket whose burst is one (Traefik's
					// default). Its span began when that one reached
					// the server, a way there after the wave left, and
					// the wait's end is read a way back late: less the
					// round trip. (Read with both, 10 a second 20 ms
					// away paced at 7 a second, and the creep dwells
					// short of that for half a minute: 1.42x, but where
					// the success came back after the refusal. Not for
					// more than one: a wave that caught a window's
					// last 50 ms read so as five in 50 ms.)
					span -= trip
				}
				g.firstPace(span, d, rl.owedBare)
			}
			rl.owed = time.Time{}
		}
		g.pz.on, g.pz.asked = false, false
		g.rf.resumed, g.rf.ok = now, 0
		resumed = true
	}
	for i := range g.quotas {
		if q := &g.quotas[i]; q.stale(now) && !g.renew(q, now) && q.askAgain(now, g.onWire()) {
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
// now. deadline, if not zero, is the latest the request may wait until:
// the waits the gate keeps out of caution, for the first wave's answers
// and the ramp's batches, hold only a request that can wait for their
// end (mayWait); a pause, a pace or a quota holds every request. It
// changes nothing. g.mu must be held.
func (g *gate) check(now time.Time, c *cost, ch *[maxQuotas]int64, deadline time.Time) (ok bool, wake time.Time, err error) {
	// decided: a pause, or a probe on the wire, or a quota only an answer
	// frees, holds the request; the quotas left are only charged.
	// (A zero time is tested first: comparing a time read from the clock
	// with one that carries no monotonic reading takes the long way.)
	decided := true
	switch {
	case !g.pz.until.IsZero() && now.Before(g.pz.until):
		wake = g.pz.until
	case g.waveFull(now) && mayWait(deadline, g.rf.resumed.Add(waveWaitMax)):
		wake = g.rf.resumed.Add(waveWaitMax)
	case g.waveOut() && g.rl != nil && now.Before(g.rl.ramp.waveEnd) && mayWait(deadline, g.rl.ramp.waveEnd):
		wake = g.rl.ramp.waveEnd
	case g.rampHolds(now) && mayWait(deadline, g.rl.ramp.end):
		wake = g.rl.ramp.end
	case g.pz.probing:
	case g.full():
	default:
		decided, wake = false, now
		if !g.nextSend.IsZero() && now.Before(g.nextSend) {
			wake = g.nextSend
		}
	}
	wire := g.onWire()
	for i := range g.quotas {
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

// mayWait reports whether a request whose deadline is deadline (zero:
// none) can wait until end. A wait the gate keeps out of caution (check)
// is not worth a request that fails for it: with WithMaxWait of 100 ms,
// twenty of thirty goroutines whose first ten calls took seconds failed
// waiting for the first wave's answers, where they would have gone.
func mayWait(deadline, end time.Time) bool {
	return deadline.IsZero() || !deadline.Before(end)
}

// quiet reports whether the gate has nothing that could hold a request
// back, pace it or charge it. g.mu must be held.
func (g *gate) quiet() bool {
	if g.pz.on || g.pz.probe || g.pz.probing || !g.pz.until.IsZero() || !g.nextSend.IsZero() || g.waveOut() || g.is(capped) || g.wave >= g.waveLimit() ||
		(g.rl != nil && (g.rl.pace.step > 0 || g.rl.ramp.size > 0)) {
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
	g.storeWire(1)
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
	if rl := g.rl; rl != nil {
		if now.IsZero() && (rl.sends != nil || rl.restart.on) {
			// A quiet gate's request (enter), whose time the send log
			// keeps and by which a window every request restarts is
			// pushed on (a zero time in the log reads as a send two
			// thousand years before the others, and the bounds it gives
			// a window are nonsense). Nothing else here needs it.
			now = time.Now()
		}
		if rl.restart.on {
			for i := range g.quotas {
				g.quotas[i].restartedBy(now)
			}
		}
		if rl.ramp.size > 0 {
			g.rampSent(now, tk)
		}
		if rl.sends != nil {
			tk.seq = rl.sends.add(now)
		}
	}
	next, wire := g.nextSend, g.onWire()
	logs := g.rl != nil && g.rl.sends != nil
	if logs {
		next = maxTime(next, maxTime(g.logFree(), g.logFull(wire)))
	}
	for i := range g.quotas {
		if ch[i] == 0 {
			continue
		}
		q := &g.quotas[i]
		_, declared := c.of(q.name)
		q.claim(now, ch[i], declared)
		if d := q.pace(now, ch[i], wire); d > 0 && !(logs && g.timedBy(i)) && now.Add(d).After(next) {
			next = now.Add(d)
		}
	}
	if step := g.paceInterval(); step > 0 && now.Add(step).After(next) {
		next = now.Add(step)
	}
	if g.rl != nil {
		next = maxTime(next, maxTime(g.rl.turn.spent(wire, g.rl.rtt.spread(), now), g.turnFree()))
	}
	if !next.IsZero() && g.nextSend.IsZero() {
		g.mark(timed)
	}
	g.nextSend = next
}

// timedBy reports whether the send log times the i-th quota: it is a
// log it times (logged), or the twin of one, a log of the same limit and
// window told in another field of the same answers (this project's
// server writes each limit as an IETF policy and as X-RateLimit-*).
// g.mu must be held.
func (g *gate) timedBy(i int) bool {
	if g.logged(i) {
		return true
	}
	q := &g.quotas[i]
	if !q.log || !q.counted {
		return false
	}
	for j := range g.quotas {
		if l := &g.quotas[j]; j != i && q.limit == l.limit && q.window == l.window && g.logged(j) {
			return true
		}
	}
	return false
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
	// A gate that has heard of rate limits but keeps no traits reads the
	// clock before it takes the lock: on some machines (a VM's clock
	// source) the read costs as much as all the rest the lock is held
	// for, and every request of the partition waits for it. Read a
	// little early, now only makes such a gate more careful: a pause or
	// a window seems a moment less over, a quota less refilled, and what
	// remains is counted, not timed. A gate with traits, or one that has
	// paced a send (a sliding window's quota, the last units of a
	// window), times its sends to the clock (a pace from the last send,
	// a sliding log's free place from its sends, a window every request
	// restarts, the ramp): read before a wait for the lock, a send would
	// be stamped early and the next let through that much too soon. It
	// reads the clock under the lock (flag timed: one read a request,
	// not two).
	var now time.Time
	if f := gateFlag(g.flags.Load()); f&heard != 0 && f&timed == 0 {
		now = time.Now()
	}
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
	if now.IsZero() || g.is(timed) {
		now = time.Now() // (timed since the early read: see above)
	}
	resumed := g.advance(now)
	var ch [maxQuotas]int64
	ok, _, err := g.check(now, c, &ch, deadline)
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
	w = &gwaiter{w: waitq.NewWaiter(1, p), cost: c, deadline: deadline}
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
	for i := range g.quotas {
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
		for i := range g.quotas {
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
		ok, wake, err := g.check(now, w.cost, &ch, w.deadline)
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
	if tk.ramp && g.rl.ramp.size > 0 {
		g.rl.ramp.out--
		g.rl.ramp.left++
	}
}

// settle takes a request that was let through off the books: its claims
// on the quotas and its place on the wire. g.mu must be held.
func (g *gate) settle(tk *ticket) {
	g.inflight--
	if tk.seen == 0 && !tk.late && g.wave > 0 {
		g.wave--
	}
	g.storeWire(-1)
	for i := range g.quotas {
		g.quotas[i].unclaim(tk.charge[i])
	}
	if tk.probe {
		g.pz.probing = false
	}
}

// leastLimit is the least limit of the quotas g knows, or 0. g.mu must
// be held.
func (g *gate) leastLimit() int64 {
	var n int64
	for i := range g.quotas {
		if q := &g.quotas[i]; q.known && q.limit > 0 && (n == 0 || q.limit < n) {
			n = q.limit
		}
	}
	return n
}

// hasQuotas reports whether the gate follows any quota. g.mu must be held.
func (g *gate) hasQuotas() bool {
	for i := range g.quotas {
		if g.quotas[i].known {
			return true
		}
	}
	return false
}

// slot returns the quota named name, taking a free slot for a new one, or
// nil when every slot is taken. g.mu must be held.
func (g *gate) slot(name string) *quota {
	for i := range g.quotas {
		if g.quotas[i].name == name {
			return &g.quotas[i]
		}
	}
	if len(g.quotas) == maxQuotas {
		return nil
	}
	g.quotas = append(g.quotas, quota{name: name, limit: -1}) // most servers report one or two
	return &g.quotas[len(g.quotas)-1]
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
	for i := range g.quotas {
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
