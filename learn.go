package throttle

import (
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/throttlekit/throttle/headers"
)

// What a gate learns from an answer: the answer as read before the
// gate's lock is taken, and learn, which applies it to the gate's models
// — the pause a refusal asks for, the pace refusals teach (aimd.go), the
// quotas the server reports (quota.go).

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
	if g.q.Len() > 0 || !g.quiet() || g.rf.answered == 0 {
		return false // the first answer is timed (gate.trip)
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
	if tk.ramp {
		g.rampDone(a != nil && a.status < 400)
	}
	if tk.seen == 0 {
		g.waveAnswered(now)
		g.ramp(now)
		if g.wave == 0 && !g.is(heard) && g.scouting() {
			// A scout's first wave is all answered, each answer learned
			// where it said: the requests it held go as they said.
			g.mark(heard)
		}
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
	if g.rf.answered == 0 {
		g.trip = int32(min(now.Sub(g.rf.resumed), time.Duration(math.MaxInt32)*time.Microsecond) / time.Microsecond)
	}
	g.rf.answered++
	if g.rl != nil && !tk.at.IsZero() {
		g.rl.rtt.sample(now.Sub(tk.at))
	}
	if a.cls.Signal.Final() {
		return time.Time{}
	}
	fresh := tk.pause == g.pz.count // sent since the last pause began
	limited := a.limited()
	if limited || a.cls.Signal == headers.Overloaded {
		g.ws.lagged(a.info, g.sentAt(tk, now), now)
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
				g.teach(tk, until, d, len(a.info.Quotas) == 0, now)
				if d%time.Second == 0 {
					// A wait in whole seconds may be a constant the server
					// writes whatever its window ("Retry-After: 1" over a
					// log of 5 s refused four probes a window): once a
					// probe after it is refused, the windows the refusals
					// bound (turn) may make the pause longer than the
					// wait, never shorter. (A wait told finer is the
					// server's own reckoning: finePace.)
					if t := &g.traits().turn; t.waitRefused(g.sentAt(tk, now), g.rf.resumed, g.rf.ok) {
						until = maxTime(until, minTime(t.bound(until), now.Add(g.maxPause)))
					}
				}
			}
			if tk.probe && d%time.Second == 0 && !a.far.any() && g.refusedLong(d, now) {
				// Probes after such waits, refused for ten of them with
				// no success since: the probes may be what keeps the
				// server refusing. A count that takes refusals in (HAProxy's
				// http_req_rate) of fewer than one a second over its
				// window is kept over its limit by a probe each second
				// for ever (3 per 5 s, "Retry-After: 1": no success in
				// 70 s). Each refused probe from then on waits half as
				// long again as the last, never less than asked; a
				// success ends the run.
				g.pz.backoff = min(max(g.pz.backoff*3/2, d), g.maxPause)
				until = maxTime(until, now.Add(g.pz.backoff))
			}
			g.pauseUntil(until)
			return g.pz.until
		}
		if !fresh {
			// Sent before the pause this answer's siblings began: it tells
			// us nothing new, and must not compound the backoff — but a
			// server that counts it holds it against us (burstHold).
			if g.rl != nil && g.rl.burst.debt > 0 && tk.pause == g.pz.count-1 {
				g.rl.burst.debt++
				g.rehold()
			}
			return time.Time{}
		}
		first := g.paceStep() == 0
		// A window that reopened and let few through is a rate in debt
		// (aimd.reopened), read before this refusal is recorded.
		debt := g.rl != nil && g.rl.turn.fewAfterOpening(g.sentAt(tk, now))
		hold := g.traits().pace.refused(now, g.rf.resumed, g.rf.ok, g.inflight+1, g.waveHeld(), g.afterAnswers(tk))
		if debt {
			t := &g.rl.turn
			g.rl.pace.reopened(now, t.quota, t.lo, t.hi)
		}
		burst := hold == aimdHold
		if first {
			g.rl.burst.at, g.rl.burst.debt = now, 1
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
		g.traits().waveStatus = a.status
		g.traits().pace.step = min(g.traits().pace.step, g.maxPause)
		g.pz.backoff = min(max(2*g.pz.backoff, g.traits().pace.step, hold), g.maxPause)
		if tk.probe && g.rl.burst.held != 0 && tk.pause == g.rl.burst.held {
			// The probe after a first burst's hold, refused: the window
			// is longer than the hold took it to be, or the server's
			// debt larger. Wait out the two windows of aimdHold from the
			// burst, not twice the hold: the likeliest length of a
			// window is still a second or two.
			g.pz.backoff = min(g.pz.backoff, max(g.rl.burst.at.Add(aimdHold+g.rl.pace.step).Sub(now), g.rl.pace.step))
		}
		sent := g.sentAt(tk, now)
		if sent.IsZero() && tk.seen == 0 {
			// A request of the first wave, sent as the gate opened: a
			// server that blocks a client from its refusal (NestJS)
			// blocks it from then (block).
			sent = g.rf.resumed
		}
		g.rl.turn.refusedAt(sent, g.rf.resumed, g.rf.ok)
		g.turnLog(tk, false, now)
		until := minTime(g.rl.turn.bound(now.Add(g.pz.backoff)), now.Add(g.maxPause))
		if g.rl.pace.wave == waveWithin && g.rl.pace.shown >= aimdSamples && !first {
			until = g.waveTurn(until, now)
		}
		g.pauseUntil(until)
		if first && burst && hold > aimdSpan {
			g.rl.burst.holdEnd, g.rl.burst.held = g.pz.until, g.pz.count
		}
		return g.pz.until
	}
	if a.status < 400 {
		g.pz.backoff = 0
		g.rf.ok++
		if g.rl != nil {
			g.rl.refusedSince = time.Time{}
		}
		if g.rl != nil && !g.rl.burst.holdEnd.IsZero() {
			g.rehold()
		}
		if fresh && g.rl != nil {
			if g.rl.pace.turned(now, tk.at) {
				// The next request, timed at the old pace when this
				// one went, waits a step of the new one.
				if !g.nextSend.IsZero() {
					g.nextSend = maxTime(g.nextSend, tk.at.Add(g.paceInterval()))
				}
			} else {
				g.rl.pace.succeeded(now, tk.at)
			}
		}
		if g.rl != nil {
			g.rl.turn.succeeded(g.sentAt(tk, now))
			if len(a.info.Quotas) == 0 {
				g.turnLog(tk, true, now)
			}
		}
	}
	return g.learnQuotas(tk, a, now)
}

// waveTurn is when a probe refused after a refusal within the first wave
// (aimd.wave is waveWithin) probes again, if sooner than until: there is no
// bucket refilling at the guess's rate, and a window the wave emptied
// turns a whole number of seconds after the wave reached it, before its
// first refusal came back. The backoff probes at one, two, four...
// seconds after that refusal (burst.at), never later (20 goroutines
// against a window of 10 a second: probes at 0.1, 0.25, 0.5 and 1.0 s,
// then one at 1.85 s; each a second, a log of 38 per 30 s counting
// refusals drew 62).
func (g *gate) waveTurn(until, now time.Time) time.Time {
	after := aimdSpan
	for !g.rl.burst.at.Add(after).After(now) {
		after *= 2
	}
	if turn := g.rl.burst.at.Add(after); turn.Before(until) {
		return maxTime(turn, now.Add(g.rl.pace.step))
	}
	return until
}

// turnLog keeps the send log of a bare server whose windows turn has
// proven (turn.span), from the answer that proves them: what became of
// each request (ok), and when it came back. A window that holds what
// the window before it let through, each request no sooner than a window
// after the one as many places back (turnFree), is never refused
// whether it counts from its first request or, as a log, from each: a
// quota paced into it, its pace creeping up, caught up with the window
// before's in @nestjs/throttler's log (setHeaders false), and each
// refusal blocked the client for a window. g.mu must be held.
func (g *gate) turnLog(tk *ticket, ok bool, now time.Time) {
	rl := g.rl
	if rl.sends == nil {
		if rl.turn.span() == 0 || !rl.turn.bursts {
			return
		}
		rl.sends = &sendLog{base: now}
	}
	if !ok {
		rl.sends.refused(tk.seq)
		return
	}
	rl.sends.admitted(tk.seq)
	rl.sends.lateBy(tk.seq, now)
}

// turnFree is when the partition's next request fits a bare server's
// window turn has proven, and found to let its quota through in a burst
// (turn.bursts): the window's length after the send as many places back
// as the most the window let through (sendLog.freeAt), or zero. (Windows
// that are a pace's runs between refusals, 25 in 5.4 s for a window of 5
// a second, would hold the pace under the rate.) g.mu must be held.
func (g *gate) turnFree() time.Time {
	rl := g.rl
	w := rl.turn.hold(rl.rtt.spread())
	if w == 0 || !rl.turn.bursts || rl.sends == nil || len(g.quotas) > 0 {
		return time.Time{}
	}
	return rl.sends.freeAt(int64(rl.turn.quota), w, rl.rtt.spread())
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
func (r *traits) burstHold(ok int) time.Duration {
	debt := aimdSpan * time.Duration(r.burst.debt) / time.Duration(max(ok, 1))
	return min(aimdSpan+debt+r.pace.step, aimdHold)
}

// rehold moves the end of a first burst's hold (traits.burst.holdEnd) to
// what the answers of its wave counted so far make it, unless something
// else has moved the pause since. g.mu must be held.
func (g *gate) rehold() {
	rl := g.rl
	if !g.pz.on || rl.burst.holdEnd.IsZero() || !g.pz.until.Equal(rl.burst.holdEnd) {
		return
	}
	until := rl.burst.at.Add(rl.burstHold(g.rf.ok))
	g.pz.until, rl.burst.holdEnd = until, until
}

// teach lets a refusal that asked for a wait of d, until until, and that
// no quota at zero explains — a limit the server does not advertise —
// pace the partition, searched on from there (aimd): the Retry-After sets
// the pause, never the pace. tk is the refused request's; bare, whether
// the refusal carried no quota's fields. g.mu must be held.
func (g *gate) teach(tk *ticket, until time.Time, d time.Duration, bare bool, now time.Time) {
	switch {
	case g.traits().pace.step == 0:
		// The pace is set when the pause ends, from all that the wave
		// got through (advance): answers that come back together are
		// counted in any order, and this refusal may be counted before
		// most of its wave's successes (a stream's are counted when its
		// first message is read: 2 of 5 and a pace of 500 ms, for a
		// server that takes 5 a second, on a loaded machine).
		owed, wave := until, false
		if at := g.sentAt(tk, now); !at.IsZero() && at.Add(d).Before(owed) {
			// Measured from sendings, the way there cancels out.
			owed = at.Add(d)
		} else {
			wave = at.IsZero() && tk.seen == 0
		}
		g.traits().owed, g.traits().owedWait, g.traits().owedBare, g.traits().owedWave = owed, d, bare, wave
	case g.rf.ok == 0:
	case g.traits().measured > 0:
		// The second refusal of a limit the server keeps beside the
		// quotas it advertises: the first pace was a guess (firstPace),
		// now measured as a server that says when to come back is. Each
		// refusal bounds the window — no longer than the run it let
		// through and the wait it asked for, as a window that frees
		// when the wait ends would be — and the tightest bound is the
		// fastest safe pace: the first's, a burst, unless this run's is
		// tighter.
		step := g.traits().measured
		g.traits().measured = 0
		if !tk.at.IsZero() { // rf.ok > 0: the case above
			step = min(step, tk.at.Add(d).Sub(g.rf.resumed)/time.Duration(g.rf.ok))
		}
		g.traits().pace.measured(min(step, g.maxPause), d)
	default:
		g.traits().pace.refused(now, g.rf.resumed, g.rf.ok, g.inflight+1, 0, g.afterAnswers(tk))
		g.traits().pace.step = min(g.traits().pace.step, g.maxPause)
		g.traits().pace.penalty = d
		if g.traits().beside = g.hasQuotas(); g.traits().beside {
			g.traits().pace.tight = 0 // back to the last rate a run got through at: each probe costs a penalty
		}
		// The span since the last pause, read as finePace says.
		from := g.rf.resumed
		if !g.pz.until.IsZero() && g.pz.until.Before(from) {
			from = g.pz.until
		}
		if d%time.Second != 0 && !g.is(spans) {
			// (A gate that spans its buckets sees a request only once
			// its bucket let it through: what it let through since the
			// last pause is the buckets' pace, not the server's.)
			g.finePace(tk, from, until, d, now)
		}
	}
}

// finePace reads a refusal that told its wait d finer than the second
// (until, answered at now; tk its request's ticket) as a span of the
// server's rate: from the end of the last pause (from) to the end of the
// wait, the server took what was sent in between, and the pace is no
// faster. A fixed window's span is the whole window: a pace faster than
// what it took is refused again in the next window, so it starts there,
// as the first refusal's did. (The first refusal's span began at our
// first request, maybe late in a window, and may overstate the rate; this
// one is a whole window.) The window began where the last pause was to
// end, not where the gate noticed (rf.resumed, later on a loaded
// machine); and it lasts the whole seconds the span is near: each end of
// the span is late by the way back of its answer, and by how long a
// loaded machine took to learn it, which differ. A span of a bucket's
// (Traefik's tells the wait for its next token) is a whole number of
// seconds only by chance: tokens every half second, a span of a second in
// which one success had come back read as a window of one a second and
// halved the pace (1.98x). Any other span is measured from sendings (the
// way there cancels out), over the successes and one request on the wire
// if any: a server may hold a request until its token is free (Traefik
// does, for up to half a token's interval), take it before the one it
// refuses and answer it after. (Counting all on the wire made the spans
// of a server 100 ms away, ten requests on the wire, far too short to
// pace by.) g.mu must be held.
func (g *gate) finePace(tk *ticket, from, until time.Time, d time.Duration, now time.Time) {
	span, n := until.Sub(from), g.rf.ok
	if n > 1 && wholeWindows(span) {
		span = span.Round(time.Second)
	} else {
		if at := g.sentAt(tk, now); !at.IsZero() && at.Add(d).Before(until) {
			span = at.Add(d).Sub(from)
		}
		n += min(g.inflight, 1)
	}
	if step := span / time.Duration(n); step > g.traits().pace.step {
		g.traits().pace.measured(min(step, g.maxPause), d)
		g.traits().beside = g.hasQuotas()
	}
}

// refusedLong reports whether the probes of the partition have been
// refused, at now, for longer than refusedLongWaits of the waits of d the
// server asks for: no success has come back since the first of them.
// (Not a window's length its refusals showed: the window a count kept
// over its limit by the probes showed is as long as they kept it so.)
// g.mu must be held.
func (g *gate) refusedLong(d time.Duration, now time.Time) bool {
	rl := g.traits()
	if rl.refusedSince.IsZero() {
		rl.refusedSince = now
		return false
	}
	return now.Sub(rl.refusedSince) > refusedLongWaits*d
}

// refusedLongWaits is how many of the waits a server asks for the
// partition's probes are refused, with no success since, before they
// back off (refusedLong).
const refusedLongWaits = 10

// sentAt is when the request of tk, answered at now, was let through:
// its ticket's time, or, for a request a quiet gate let through without
// reading the clock after answers had come back, now less the first
// answer's round trip (gate.trip): measured from there, a refusal's wait
// that frees a token 100 ms after the last request does not read as 140
// ms, the way back of its answer added (Traefik's bucket of 10 a second,
// one request at a time 20 ms away: a pace of 7 a second, 1.43x). Not a
// request of the first wave: its refusal's span, read from sendings, is
// as short as the tail of a window the wave arrived in (a fixed window's
// last 50 ms: five in 50 ms, a pace that the next window refuses
// several times over; TestFakeServerRefusingWithRetryInfo in
// grpcthrottle), and read from the answers no shorter than a round trip.
// Zero when unknown. g.mu must be held.
func (g *gate) sentAt(tk *ticket, now time.Time) time.Time {
	switch {
	case !tk.at.IsZero():
		return tk.at
	case g.trip > 0 && tk.seen > 0:
		return maxTime(now.Add(-g.firstTrip()), g.rf.resumed)
	}
	return time.Time{}
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
func (g *gate) firstPace(span, d time.Duration, bare bool) {
	if bare && g.hasQuotas() && g.rf.ok < aimdSamples {
		// A refusal with no quota's fields, beside quotas the server
		// advertises, after a run of fewer than aimdSamples: it
		// measures no limit of the server's own. Another client that
		// shares the quota spent what an answer said remained
		// (@nestjs/throttler's 429 carries only Retry-After), and one
		// success over the second the wait took paced the partition
		// at one request a second, long after the other had gone. The
		// wait is obeyed; the quotas pace. (A refusal that carries
		// its quota's fields, at room, is a limit beside them: this
		// project's leaky bucket refuses after three.)
		return
	}
	if run := span - d; g.hasQuotas() && run < aimdSpan && d > aimdSpan && d <= guessWaitMax && g.rf.ok >= aimdSamples {
		step := time.Duration(float64(aimdSpan/time.Duration(g.rf.ok)) * aimdCut)
		g.traits().pace.measured(step, d)
		g.traits().beside = true
		g.traits().measured = min(span/time.Duration(g.rf.ok), g.maxPause)
		return
	}
	switch trip := g.firstTrip(); {
	case d%time.Second == 0:
		// A wait told in whole seconds is rounded up (or a constant): the
		// window ended up to a second before the wait did, and windows
		// are whole seconds long.
		span = max(span.Truncate(time.Second), time.Second)
	case trip > 0 && span > trip && wholeWindows(span-trip):
		// Whole seconds less the first round trip: a window that began
		// when the first request arrived, a way there after the span
		// began, and whose end the wait told is read a way back late
		// (20 goroutines against a window of 10 a second 40 ms away,
		// "Retry-After: 0.99": 1.08 s, paced 8 % under the rate for the
		// whole run, 1.15x).
		span = (span - trip).Round(time.Second)
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
	g.traits().pace.measured(min(span/time.Duration(g.rf.ok), g.maxPause), d)
	g.traits().beside = g.hasQuotas()
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
		for j := range g.quotas {
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
	if len(qs) < 2 {
		return // (GitHub's answers: one quota)
	}
	// Which resets are written finer than the second, read once: most
	// answers have none (GitHub's, Anthropic's), and then no quota has
	// a twin to narrow it. (An answer of more quotas than the array
	// holds has the rest's read as they are met.)
	readFine := func(i int) bool { return !qs[i].Reset.IsZero() && !wholeSeconds(qs[i].Reset, now) }
	var fine [maxQuotas]bool
	isFine := func(i int) bool {
		if i < len(fine) {
			return fine[i]
		}
		return readFine(i)
	}
	some := false
	for i := range qs {
		if i < len(fine) {
			fine[i] = readFine(i)
		}
		some = some || isFine(i)
	}
	if !some {
		return
	}
	for i := range qs {
		q := &qs[i]
		if q.Reset.IsZero() || q.Remaining < 0 || isFine(i) {
			continue
		}
		for j := range qs {
			t := &qs[j]
			if isFine(j) && t.Limit == q.Limit && t.Remaining == q.Remaining &&
				!t.Reset.After(q.Reset) && t.Reset.After(q.Reset.Add(-time.Second-resetSlack)) {
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
	for i := range g.quotas {
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
	// Answers of a window that ends beyond this (the horizon, and beyond
	// span's reach) may only count down (quota.counts).
	far := now.Unix() + max(spanFar, int64(g.maxPause/time.Second)+1)
	for i := range a.info.Quotas {
		s := &a.info.Quotas[i]
		if s.Remaining < 0 && s.Unit != "concurrent-requests" {
			continue
		}
		q := g.slot(s.Name)
		if q == nil {
			continue
		}
		if q.counts(s, a.refill, far, now) && (g.rl == nil || g.rl.sends == nil) && !g.is(longWay) {
			// GitHub's hourly 5,000, most of the hour: only the count
			// moves, and nothing below (with no send log to count it
			// in: counted) would do more than count does.
			q.count(s, !q.known || tk.ver >= q.ver, g.ver+1, now)
			learned = true
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
		// A round trip is timed from a request sent on the gate's
		// clock after answers came back: a first wave's carries the
		// setting up of its connections (and is sent at resumed only
		// as far as the gate knows).
		timed := !tk.at.IsZero() && tk.seen > 0
		if s.Remaining*2 <= s.Limit && g.restartable(q, tk, a, s, sent, now) {
			q.restart()
			g.traits().restart.on = true // keeps lastHit from now on
		}
		if !a.refill && q.fine && !q.refill {
			if w := statedWindow(a.info.Quotas, s); q.rated(s, w, sent, now) {
				q.rates(s, w)
			}
		}
		if a.status < 400 && !q.log && (q.stillCounted(s, sent) > 0 || q.lingers(s, tk.probe)) {
			q.log = true // a sliding log, once the send log holds a window of ours (counted)
		}
		fresh, before, slid := !q.known || tk.ver >= q.ver, q.at, q.sliding()
		q.apply(s, a.refill, fresh, reset, guessed, timed, g.ver+1, sent, now)
		if !slid && q.sliding() && !tk.at.IsZero() {
			// Found to slide by this answer: it is paced from now on
			// (quota.pace), and the next request a pace after the one
			// this answers, not at once (go-chi/httprate, its windows
			// ending 5 ms after the second: the request sent as the
			// answer that found it came back was refused, and its
			// Retry-After was a second).
			g.nextSend = maxTime(g.nextSend, tk.at.Add(q.pace(now, 1, 0)))
		}
		if !fresh && q.at.Equal(before) && a.status < 400 {
			q.spent(tk.charge[i], sent)
		}
		q.reachTo(s, now)
		if s.Limit > 0 && (g.rl != nil && g.rl.sends != nil || q.log && !q.refill || (s.Remaining == 0 || g.rf.answered == 1) && s.Limit < sendLogSize && !a.refill && wholeSeconds(s.Reset, now)) {
			g.counted(i, q, tk, a, s, now)
		}
		if q.restarts {
			g.restarted(q, now)
		}
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
		if s.Remaining == 0 && !q.refill && !q.restarts {
			// A window at zero: nothing before its reset. (A refilling
			// quota at zero only waits for what refills, and a window
			// every request restarts for its end, which it renews
			// without a probe: readyAt.)
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

// restartable applies an answer to the request tk, sent at sent, to the
// hypothesis that q is a window every request restarts (stretch), and
// reports whether the answer shows it is one: a refusal that pushed the
// window's end on — its reset lies a second or more past the one the
// server last wrote, or, for a probe of a window we took to have ended,
// further from it than a window lasts (span's upper bound) — while every
// answer so far fits such a window. An answer that fits none ends the
// hypothesis, and a window taken for one goes back to what its resets
// say. learnQuotas asks only of answers that say half the limit or less
// remains: those of a window far from its end tell nothing a later one
// does not (and GitHub's hourly 5,000 need not pay for them). g.mu must
// be held.
func (g *gate) restartable(q *quota, tk *ticket, a *answer, s *headers.Quota, sent, now time.Time) bool {
	if a.refill || s.Reset.IsZero() || s.Limit <= 0 || q.fine || !wholeSeconds(s.Reset, now) {
		return false
	}
	q.stretch.learn(s.Reset, sent, now)
	if q.stretch.window() == 0 {
		q.restarts = false
		return false
	}
	if q.restarts || a.status < 400 || s.Remaining != 0 {
		return false
	}
	// Both resets are rounded up: a second or more apart, the end moved.
	pushed := q.said != 0 && s.Reset.Sub(q.said.time()) >= time.Second
	beyond := tk.probe && !q.refill && q.span.hi > 0 && s.Reset.Sub(sent) > q.span.hi+spanClock
	return pushed || beyond
}

// renew opens the next window of q if it is one every request restarts
// (quota.renew), and no request is on the wire that may yet push its end
// on. g.mu must be held.
func (g *gate) renew(q *quota, now time.Time) bool {
	return q.restarts && g.inflight == 0 && q.renew(now)
}

// restarted puts the end of a window that every request restarts (q,
// quota.restarts) a window after the last request reached the server
// (lastHit): by the time its answer came, now for this one, less half
// the shortest round trip span trusts (the way back is no shorter) —
// unless the server's word is later: a reset it writes in whole seconds
// is read as rounded up (the end lies up to a second before it). The
// window's length is what its answers allow (stretch), else span's
// upper bound. g.mu must be held.
func (g *gate) restarted(q *quota, now time.Time) {
	rl := g.traits()
	rl.restart.lastHit = maxTime(rl.restart.lastHit, now.Add(-q.span.ways()/2))
	w := q.lasts()
	if w <= 0 || !q.known {
		return
	}
	floor := q.reset
	if !q.fine {
		floor = floor.Add(-time.Second)
	}
	q.reset = maxTime(rl.restart.lastHit.Add(w), floor)
}

// counted applies what an answer to the request tk says of quota q, the
// i-th, to the partition's send log (sendlog.go): whether the request is
// in a log the server keeps (admitted) or not (refused), and how many of
// the partition's admitted requests its window held, which bounds its
// length (whatever q is taken for, so that a window found to slide later
// has the bounds of the answers before). Once q is found to be a sliding
// window whose resets are whole seconds ahead (its window is at least as
// long as the furthest ahead they were: reach), a window they bound
// shorter than reach made it is taken (and, once taken, a longer one they
// bound later; for a log, one as long), and from then on the log times
// the requests (logFree). The log starts with the first answer, or else
// the first that finds a window at zero, of a window under sendLogSize
// whose reset is in whole seconds: a window that turns out to slide is
// then bounded by the sends of the windows before it (Flask-Limiter's
// moving window, whose first windows look like fixed windows from a
// client's first request: 1.08x -> 1.03x in fake time). g.mu must be
// held.
func (g *gate) counted(i int, q *quota, tk *ticket, a *answer, s *headers.Quota, now time.Time) {
	rl := g.traits()
	if rl.sends == nil {
		rl.sends = &sendLog{base: now}
		if tk.seen == 0 && g.rf.answered == 1 && !g.rf.resumed.IsZero() {
			// Begun at the first answer: with the first wave in it.
			// (For resets in epoch seconds too, since count reads each
			// send's answer time with its sending: read by the sends
			// alone, the first wave, taken in turn by Flask-Limiter's
			// server on a loaded machine, bent the window its moving
			// window's counts bound, 1.21-5.3x; begun at the probe of
			// the second window instead, its window was held as two
			// seconds until the third, 1.17-1.22x at 20 a second.)
			rl.sends.startWave(int(g.wave)+1, g.rf.resumed)
		} else {
			return
		}
	}
	l := rl.sends
	if tk.seq == 0 && tk.seen == 0 {
		tk.seq = l.firstWave()
	}
	if q.log && !q.refill && !q.restarts && !l.freeAt(q.limit, 0, 0).IsZero() {
		// Found to count like a log (stillCounted), and the send log
		// has a window's worth of our requests to time it by: as many
		// as its limit not refused (counted from the log's first send
		// alone, refusals among them left logFree nothing to hold by,
		// and a window's worth went at once: 21 refusals in one real
		// run of this project's server's log at 20 a second, loaded).
		w := q.stillWindow(s)
		if w == 0 && !q.fine && s.Reset.After(now) && s.Reset.Nanosecond() != 0 {
			// No window span can tell (a loaded server's answers, a
			// round trip of a tenth of its window or more, leave it
			// none): the one the answer's reset says, in whole seconds
			// relative to it (as lingers reads), rounded up — for the
			// probe that found the log, @nestjs/throttler's window
			// from the probe. Without it, its log was taken for a
			// fixed window and each window waited out to its reset:
			// 1.17-1.31x on a loaded machine. (Not an epoch reset:
			// Flask-Limiter's moving window says when its log will be
			// empty, a second and more past a window; read as its
			// window, one loaded CI run was paced to a stall, 57 of
			// 160 units in 38 s.)
			w = s.Reset.Sub(now).Round(time.Second)
		}
		if w > 0 {
			q.slides(w, true)
			// Its resets reach a window ahead (whole again a window
			// after its newest entry): the steps between them, which
			// fall where its entries do, never shorten it.
			q.reach = w
			q.narrow(w)
			if g.logTimes() {
				// Timed by the log from now on: the next request too,
				// not only those after it (two went at once on the
				// switch, into @nestjs/throttler's log, and were
				// refused).
				g.nextSend = maxTime(g.nextSend, g.logFree())
			}
		}
	}
	b := &l.bounds[i]
	if a.status >= 400 {
		l.refused(tk.seq)
		if g.logged(i) {
			b.off = true // a request it timed, refused (logTimes)
		}
		return
	}
	l.count(b, tk.seq, s.Limit-s.Remaining, rl.rtt.jitter(), now)
	if rtt := l.lateBy(tk.seq, now); g.logged(i) && rtt > rl.rtt.srtt+rl.rtt.jitter() {
		// An answer far later than the others says its request may
		// have been taken as late, and leaves the log that much later
		// (lateness) than the next request was timed for when the last
		// one went: it waits for that too. (@nestjs/throttler, taking
		// a window's first requests 80 ms late on a loaded machine:
		// the probe a window after their sends was refused, and
		// blocked for a window.) Not an answer as late as the others:
		// the next request will be taken as late as they were (timed
		// by every answer's round trip, each window of a real NestJS
		// under load waited a round trip more: 1.03-1.07x -> 1.04-1.21x).
		g.nextSend = maxTime(g.nextSend, g.logFree())
	}
	if !q.sliding() || q.reach <= 0 {
		return
	}
	if w := b.window(); w > 0 && (w < q.window || q.counted && w > q.window || q.log && !q.counted && w == q.window) {
		q.narrow(w)
		if g.logTimes() {
			// The sends paced before are timed by the log from now on:
			// the next waits for it too.
			g.nextSend = maxTime(g.nextSend, g.logFree())
		}
	}
}

// logFree is when the partition's next request fits every sliding log
// its send log times (logged), once the counts of their answers fit an
// exact log of our requests: a window after the limit-th newest request
// in each, and the spread of the way there; zero if none is timed or
// each holds fewer. A log admits its limit in any window, bursts
// included, so it is not paced under its limit (quota.pace). g.mu must
// be held.
func (g *gate) logFree() time.Time {
	var t time.Time
	for i := range g.quotas {
		if g.logged(i) {
			q := &g.quotas[i]
			t = maxTime(t, g.rl.sends.freeAt(q.limit, q.window+spanClock, g.rl.rtt.spread()))
		}
	}
	return t
}

// logFull is when the partition's next request fits the sliding logs
// whose windows their answers' counts have not pinned yet (logged), once
// what the last answer said remains of them is spent (quota.pace lets
// that much go at once): as logFree, with the window each quota was
// taken to have (as far as its resets reach, or span's guess: fell), not
// less than its length; zero if there is no such log, room remains, or
// the send log holds fewer. wire is the partition's requests on the
// wire, this one included. g.mu must be held.
func (g *gate) logFull(wire int) time.Time {
	var t time.Time
	for i := range g.quotas {
		q := &g.quotas[i]
		if g.rl.sends.bounds[i].off || !q.sliding() || !q.log || q.counted || q.left(wire) > 0 {
			continue
		}
		t = maxTime(t, g.rl.sends.freeAt(q.limit, q.window+spanClock, g.rl.rtt.spread()))
	}
	return t
}

// logTimes reports whether the send log times any of the partition's
// quotas (logged). g.mu must be held.
func (g *gate) logTimes() bool {
	for i := range g.quotas {
		if g.logged(i) {
			return true
		}
	}
	return false
}

// logged reports whether the send log times the partition's requests by
// its i-th quota (logFree) rather than by the pace of that quota
// (quota.pace): the quota is a sliding window whose answers' counts fit
// an exact log of our requests, and no request the log timed was refused
// with its fields (a log that other clients' requests share, or one less
// exact than it looked, is paced from then on). g.mu must be held.
func (g *gate) logged(i int) bool {
	q := &g.quotas[i]
	return g.rl != nil && g.rl.sends != nil && !g.rl.sends.bounds[i].off && q.counted && q.sliding()
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
	for i := range g.quotas {
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

// statedWindow is the window s states, or, where it states none, the
// window of its twin in the same answer (qs): a quota of the same limit
// and remaining that states one (this project's server writes each limit
// as an IETF policy, which states its window, and as X-RateLimit-*, which
// does not); 0 if neither.
func statedWindow(qs []headers.Quota, s *headers.Quota) time.Duration {
	if s.Window > 0 {
		return s.Window
	}
	for i := range qs {
		if t := &qs[i]; t.Window > 0 && t.Limit == s.Limit && t.Remaining == s.Remaining {
			return t.Window
		}
	}
	return 0
}
