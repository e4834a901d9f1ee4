package throttle

import "time"

// The first wave: the requests a partition sends before any answer comes
// back. The requests after it wait for its answers (waveOut), and when
// they all succeeded without a word of rate limits, go in batches
// doubling from one (ramp), so that a wave that spent the server's window
// costs one refusal, not a wave of them.

// waveFull reports whether the first wave is as large as it may be
// (waveMax) and none of its answers has come back: a request sent now
// waits for them, then for the rest of them (waveOut), as the first
// wave's successors do, and goes as its answers allow — what remains of
// a quota they advertise, or the ramp after a wave that said nothing.
// Fifty goroutines against a limit of ten a second sent fifty at once
// and forty were refused, whatever the answers said: now at most
// waveMax go before any answer. A first call slower than waveWaitMax (a
// long poll) holds the rest back once, and not for long: then they go
// as part of its wave. An answer that names a bucket is learned in the
// bucket's gate, not in the partition's (answered stays 0 there): heard
// ends the wait, and the requests that waited go through their bucket's
// gate (Transport.RoundTrip). g.mu must be held.
func (g *gate) waveFull(now time.Time) bool {
	return g.wave >= g.waveLimit() && g.rf.answered == 0 && !g.is(heard) && now.Before(g.rf.resumed.Add(waveWaitMax))
}

// waveLimit is the most requests g sends before its first answer:
// waveMax, or fewer (waveCap).
func (g *gate) waveLimit() int32 {
	if g.waveCap > 0 {
		return int32(g.waveCap)
	}
	return waveMax
}

// waveMax is the most requests a partition sends before the first
// answer comes back: the most refusals issue 18 allows a run of 250
// (ten), and as many as GitHub's client keeps on the wire
// (githubMaxWire).
const waveMax = 10

// waveOut reports whether answers to the first wave — the requests sent
// before any answer came back — have begun to come back and some are still
// out. A request sent then, before they are all in, would go to a server
// whose word on the first wave is only half heard: the answers of one
// wave come back in any order, and the goroutines whose successes came
// first would send a second wave into the limit their siblings' refusals,
// still on the way, report (a first wave of 10 against a limit of 5 a
// second: 5 refused, and 5 more). So it waits for them, until waveEnd
// (advance; waveAnswered extends it while they keep coming). g.mu must
// be held.
func (g *gate) waveOut() bool { return g.wave > 0 && g.rf.answered > 0 }

// waveAnswered extends the wait for the first wave's answers (waveEnd)
// when one of them comes back while requests wait for the rest: its
// answers are still coming, so the rest are waited for waveWaitMin more,
// no later than waveWaitMax after the first request went. A slow call of
// the wave (a long poll) is still waited for only once the others are
// in, and not for long; but a loaded server answers a wave over many
// times its first round trip (real koa-ratelimit beside the race-enabled
// tests: 32 ms to 252 ms), and the wave's stragglers, their connections
// set up last, reach it behind the ramp's requests sent on the
// connections the first answers freed — which then spent the window the
// stragglers were counted in (3–10 refusals in the first window, where
// the wave itself was within the limit). g.mu must be held.
func (g *gate) waveAnswered(now time.Time) {
	if !g.waveOut() || g.rl == nil || g.rl.ramp.waveEnd.IsZero() || !now.Before(g.rl.ramp.waveEnd) {
		return
	}
	g.rl.ramp.waveEnd = maxTime(g.rl.ramp.waveEnd, minTime(now.Add(waveWaitMin), g.rf.resumed.Add(waveWaitMax)))
}

// ramp starts the ramp (traits.ramp) when a first wave of several has
// been answered (or its stragglers are no longer waited for: advance), all
// its answers successes without a word of rate limits. The wave was
// within the server's limit; whether more are, nothing says. Released
// together, the requests after it would all be refused if the wave had
// spent a window (a wave as large as the limit: ten refusals where one
// tells as much); the next goes alone, then two, then four..., each batch
// once the last is answered, until a batch as large as the first wave got
// through. They need not be waiting yet: on a loaded machine the wave's
// last answer is often in before the goroutines it freed ask again, and
// a ramp begun only for requests already queued then let ten go together
// (ten refusals, real express-rate-limit without headers, three runs in
// four). now is the time of the last answer. g.mu must be held.
func (g *gate) ramp(now time.Time) {
	if g.wave != 0 || g.rf.ok < 2 || g.pz.count > 0 || g.pz.probing || g.is(heard) || g.hasQuotas() {
		return
	}
	rl := g.traits()
	if rl.ramp.top > 0 {
		return // once
	}
	rl.ramp.top, rl.ramp.size, rl.ramp.left = g.rf.ok, 1, 1
	// A batch is waited for twice as long as the first wave took, within
	// the bounds of the wait for that wave: a slow call (a long poll)
	// holds the others back once, and not for long.
	rl.ramp.wait = min(max(2*now.Sub(g.rf.resumed), waveWaitMin), waveWaitMax)
}

// rampHolds reports whether the ramp holds a request sent now: its batch
// is all sent and not all answered, and rampEnd has not passed. g.mu must
// be held.
func (g *gate) rampHolds(now time.Time) bool {
	rl := g.rl
	return rl != nil && rl.ramp.size > 0 && rl.ramp.left == 0 && rl.ramp.out > 0 && now.Before(rl.ramp.end)
}

// rampSent counts a request let through at now in the ramp's batch, on
// its ticket; the ramp is on (traits.ramp.size). g.mu must be held.
func (g *gate) rampSent(now time.Time, tk *ticket) {
	rl := g.rl
	if rl.ramp.left == 0 {
		// The batch was not all answered by rampEnd: the calls are slow,
		// and the ramp ends.
		rl.ramp.size = 0
		return
	}
	rl.ramp.left--
	rl.ramp.out++
	rl.ramp.end = now.Add(rl.ramp.wait)
	tk.ramp = true
}

// rampDone applies the answer to a request of the ramp's batch: ok
// reports a success that said nothing of rate limits. The ramp ends with
// anything else (a refusal has paused the partition: the pace takes
// over) and once a batch as large as the first wave got through; the
// next batch is twice the last once the last is all answered. g.mu must
// be held.
func (g *gate) rampDone(ok bool) {
	rl := g.rl
	if rl.ramp.out > 0 {
		rl.ramp.out--
	}
	switch {
	case rl.ramp.size == 0:
	case !ok || g.pz.count > 0 || g.is(heard) || g.hasQuotas():
		rl.ramp.size = 0
	case rl.ramp.out > 0 || rl.ramp.left > 0:
		// The rest of the batch is still out: its answers come back
		// together, in any order, and a success read before a sibling's
		// refusal must not release the queue into the window that
		// refusal reports.
	case rl.ramp.size >= rl.ramp.top:
		rl.ramp.size = 0
	default:
		rl.ramp.size *= 2
		rl.ramp.left = rl.ramp.size
	}
}

// waveWaitMax bounds how long requests wait for the first wave's
// answers (advance), and how far the answers still coming extend that
// wait from the first request (waveAnswered): a wave's answers come back
// within a few round trips, even on a loaded server, and a slow call (a
// long poll) is not waited for beyond it.
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
	if g.rl == nil || g.rl.ramp.waveEnd.IsZero() || g.pz.count > 0 {
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
