package throttle

import (
	"context"
	"github.com/throttlekit/throttle/headers"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSendLogBoundsTheWindow: answers that say how many of the client's
// requests a sliding log holds bound its window between the sends that
// count back to them; a window of a second, paced at 213 ms (a client
// that took it for two seconds), is found from a few answers.
func TestSendLogBoundsTheWindow(t *testing.T) {
	l := sendLog{base: t0}
	const step = 213 * time.Millisecond
	var seqs []uint32
	for i := range 20 {
		seqs = append(seqs, l.add(t0.Add(time.Duration(i)*step)))
	}
	for _, s := range seqs[:10] {
		l.admitted(s)
	}
	// A log of 1 s holds the answered request and the four before it
	// (4 × 213 ms = 852 ms back; the fifth, 1,065 ms back, has left).
	var b logBounds
	l.count(&b, seqs[10], 5, 10*time.Millisecond, t0)
	assert.Equal(t, 852*time.Millisecond-10*time.Millisecond, b.lo)
	assert.Equal(t, 1065*time.Millisecond+10*time.Millisecond, b.hi)
	assert.Equal(t, time.Second, b.window())

	// Too few answered yet to tell: the log does not reach back.
	var short sendLog
	short.base = t0
	s := short.add(t0)
	var sb logBounds
	short.count(&sb, s, 3, 0, t0)
	assert.Zero(t, sb.window())

	// A request before it not answered yet may still be refused, and so
	// not be in the log: the count bounds nothing.
	var pending sendLog
	pending.base = t0
	for i := range 10 {
		seqs[i] = pending.add(t0.Add(time.Duration(i) * step))
		if i != 7 {
			pending.admitted(seqs[i])
		}
	}
	var pb logBounds
	pending.count(&pb, seqs[9], 5, 0, t0)
	assert.Zero(t, pb.hi)
	assert.Zero(t, pb.lo)
}

// TestSendLogSendsTogether: requests sent within the jitter of the
// answered one may have reached the server in any order, so the count
// may take in those sent just after it and leave out those sent just
// before: the bounds allow both. Two sent in the same instant, the later
// in the log counted first by the server, once put a real log of 5 per
// 2 s at one second.
func TestSendLogSendsTogether(t *testing.T) {
	l := sendLog{base: t0}
	var old, burst []uint32
	for i := range 5 {
		old = append(old, l.add(t0.Add(time.Duration(i)*10*time.Millisecond)))
	}
	for range 5 {
		burst = append(burst, l.add(t0.Add(2050*time.Millisecond))) // one instant
	}
	for _, s := range append(old, burst...) {
		l.admitted(s)
	}
	// The first of the burst in our log, answered "4 of yours are in":
	// the server counted three of the burst before it. Read in our
	// log's order, the fourth back is an old send 2.03 s back — a window
	// longer than two seconds, where the log is of two.
	var b logBounds
	l.count(&b, burst[0], 4, time.Millisecond, t0)
	assert.Less(t, b.lo, 2*time.Second, "the c-th counted may be one of the burst")
	assert.Zero(t, b.window(), "nothing pinned by a burst alone")

	// The last of the burst, answered "1 of yours": counted first, the
	// four before it in our log not yet. Its bound back reaches past them.
	l2 := sendLog{base: t0}
	for i := range 5 {
		l2.admitted(l2.add(t0.Add(time.Duration(i) * 10 * time.Millisecond)))
	}
	var b2 []uint32
	for range 5 {
		b2 = append(b2, l2.add(t0.Add(2050*time.Millisecond)))
	}
	for _, s := range b2 {
		l2.admitted(s)
	}
	var bb logBounds
	l2.count(&bb, b2[4], 1, time.Millisecond, t0)
	assert.GreaterOrEqual(t, bb.hi, 2*time.Second, "the first past the window may be an old send")
}

// TestSendLogSkipsRefused: a refused request is not in a log (it keeps
// what it admitted), so the count steps over it.
func TestSendLogSkipsRefused(t *testing.T) {
	l := sendLog{base: t0}
	a := l.add(t0)                              // in
	b := l.add(t0.Add(100 * time.Millisecond))  // refused
	c := l.add(t0.Add(700 * time.Millisecond))  // in
	d := l.add(t0.Add(1200 * time.Millisecond)) // answered: holds c and d
	l.admitted(a)
	l.refused(b)
	l.admitted(c)
	var bd logBounds
	l.count(&bd, d, 2, 0, t0)
	assert.Equal(t, 500*time.Millisecond, bd.lo, "back to c")
	assert.Equal(t, 1200*time.Millisecond, bd.hi, "back to a, not b")
	assert.Equal(t, time.Second, bd.window())
}

// TestSendLogStartsOver: bounds that cross the ones before (no exact log,
// or a window that changed) are replaced, not narrowed to nothing; and
// bounds that allow two whole seconds tell no window.
func TestSendLogStartsOver(t *testing.T) {
	l := sendLog{base: t0}
	b := logBounds{lo: 1500 * time.Millisecond, hi: 1900 * time.Millisecond}
	a := l.add(t0)
	s2 := l.add(t0.Add(300 * time.Millisecond))
	l.admitted(a)
	l.count(&b, s2, 1, 0, t0) // in (0, 300 ms]: crosses (1.5 s, 1.9 s]
	assert.Equal(t, time.Duration(0), b.lo)
	assert.Equal(t, 300*time.Millisecond, b.hi)
	assert.Zero(t, b.window(), "no whole second in (0, 300 ms]")
	b.lo, b.hi = 500*time.Millisecond, 2500*time.Millisecond
	assert.Zero(t, b.window(), "one second or two")
}

// TestSendLogFreeAt: the next request fits a log of limit a window after
// the limit-th newest send in it or on its way; refused sends are not in
// it, and a log holding fewer than limit sends is free now.
func TestSendLogFreeAt(t *testing.T) {
	l := sendLog{base: t0}
	var seqs []uint32
	for i := range 5 {
		seqs = append(seqs, l.add(t0.Add(time.Duration(i)*100*time.Millisecond)))
	}
	assert.Zero(t, l.freeAt(6, time.Second, 0), "five sends, a limit of six")
	assert.Equal(t, t0.Add(time.Second), l.freeAt(5, time.Second, 0), "the oldest of five leaves a window after it")
	assert.Equal(t, t0.Add(1300*time.Millisecond), l.freeAt(2, time.Second, 0))
	l.refused(seqs[3])
	assert.Equal(t, t0.Add(1200*time.Millisecond), l.freeAt(2, time.Second, 0), "a refused send is not in the log")
	l.admitted(seqs[2])
	assert.Equal(t, t0.Add(1200*time.Millisecond), l.freeAt(2, time.Second, 0), "admitted or on its way, it counts")
	assert.Zero(t, l.freeAt(sendLogSize, time.Second, 0), "a limit past what the log keeps")
}

// TestQuietGateLogsItsSendTime: a gate with nothing to hold a request
// back lets it through without reading the clock (enter), but once it
// keeps a send log, the send goes into the log at the time it was let
// through — a zero time there reads as a send two thousand years before
// the others, and the bounds it gives on a window are nonsense.
func TestQuietGateLogsItsSendTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		g := &gate{key: "api.test", maxPause: time.Minute}
		g.rl = &traits{sends: &sendLog{base: start}}
		g.rf.resumed = start // not its first request
		time.Sleep(300 * time.Millisecond)
		require.True(t, g.quiet())
		var tk ticket
		_, err := g.enter(context.Background(), time.Time{}, nil, &tk)
		require.NoError(t, err)
		require.NotZero(t, tk.seq)
		assert.Equal(t, int64(300*time.Millisecond), g.rl.sends.at[tk.seq%sendLogSize])
	})
}

// TestLogTimedOnlyWithItsLimitOfSends: a quota found to count like a log
// (stillCounted) is timed by the send log once the log holds as many of
// our sends as its limit that were not refused — not merely as many
// sends: with refused ones among them, logFree has nothing to hold by,
// and a window's worth would go at once.
func TestLogTimedOnlyWithItsLimitOfSends(t *testing.T) {
	now := t0
	g := &gate{key: "api.test", maxPause: time.Minute}
	g.quotas = []quota{{name: "default", limit: 5}}
	q := &g.quotas[0]
	q.known, q.fine, q.log, q.heard = true, true, true, 3
	q.span = span{openAt: now, lo: 950 * time.Millisecond, hi: 1040 * time.Millisecond}
	l := &sendLog{base: now}
	g.rl = &traits{sends: l}
	for i := range 5 {
		seq := l.add(now.Add(time.Duration(i) * time.Millisecond))
		if i < 2 {
			l.refused(seq)
		}
	}
	s := &headers.Quota{Name: "default", Limit: 5, Remaining: 1, Reset: now.Add(time.Second)}
	g.counted(0, q, &ticket{}, &answer{status: 200}, s, now)
	assert.False(t, q.sliding(), "five sends, two refused: three in the log")
	for range 2 {
		l.add(now.Add(10 * time.Millisecond))
	}
	g.counted(0, q, &ticket{}, &answer{status: 200}, s, now)
	assert.True(t, q.sliding() && q.log && q.counted, "five not refused: timed as a log of its window")
	assert.Equal(t, time.Second, q.window)
}

// TestSendLogLateness: a send whose answer took longer than the quickest
// leaves the log that much later (lateBy, freeAt); under spanWaysMin the
// quickest is the server's own time, and each send is as late as its
// answer; a send not answered yet is as late as freeAt is told; and the
// limit-th newest is not the latest to leave when an older one came back
// later; and lateness is read against the quickest round trip when it is
// read, not when the send came back.
func TestSendLogLateness(t *testing.T) {
	l := sendLog{base: t0}
	a := l.add(t0)
	b := l.add(t0.Add(100 * time.Millisecond))
	l.admitted(a)
	l.lateBy(a, t0.Add(60*time.Millisecond)) // the quickest: 60 ms
	l.admitted(b)
	l.lateBy(b, t0.Add(200*time.Millisecond)) // 100 ms: 40 ms late
	assert.Equal(t, t0.Add(1140*time.Millisecond), l.freeAt(1, time.Second, 0), "the newest, 40 ms late")
	assert.Equal(t, t0.Add(time.Second), l.freeAt(2, time.Second, 0), "the older leaves first")
	c := l.add(t0.Add(150 * time.Millisecond))
	assert.Equal(t, t0.Add(1170*time.Millisecond), l.freeAt(1, time.Second, 20*time.Millisecond), "on its way: as late as told")
	e := l.add(t0.Add(300 * time.Millisecond))
	l.admitted(e)
	l.lateBy(e, t0.Add(325*time.Millisecond)) // a quicker round trip: 25 ms
	assert.Equal(t, t0.Add(1175*time.Millisecond), l.freeAt(3, time.Second, 0), "read against the quickest now: b is 75 ms late")

	quick := sendLog{base: t0}
	d := quick.add(t0)
	quick.admitted(d)
	quick.lateBy(d, t0.Add(5*time.Millisecond))
	assert.Equal(t, t0.Add(1005*time.Millisecond), quick.freeAt(1, time.Second, 0), "a round trip of 5 ms: as late as its answer")
	quick.lateBy(c, t0.Add(time.Second)) // not in this log
	quick.refused(d)
	quick.lateBy(d, t0.Add(time.Second))
	assert.Zero(t, quick.freeAt(1, time.Second, 0), "refused: not in the log")
}

// TestSendLogStartsWithTheFirstWave: a log begun at the first answer
// holds the first wave, sent together before it; their answers, whose
// tickets carry no place in the log, take its places in turn, each as
// late as its answer came (a first wave is taken by the server in turn).
func TestSendLogStartsWithTheFirstWave(t *testing.T) {
	l := sendLog{base: t0.Add(10 * time.Millisecond)} // begun at the first answer
	l.startWave(3, t0)
	assert.Equal(t, uint32(3), l.next)
	for i, back := range []time.Duration{10, 20, 40} {
		seq := l.firstWave()
		require.Equal(t, uint32(i+1), seq)
		l.admitted(seq)
		l.lateBy(seq, t0.Add(back*time.Millisecond))
	}
	assert.Zero(t, l.firstWave(), "the wave is all answered")
	assert.Equal(t, t0.Add(1010*time.Millisecond), l.freeAt(3, time.Second, 0), "the first answered leaves first")
	assert.Equal(t, t0.Add(1040*time.Millisecond), l.freeAt(1, time.Second, 0), "the last answered, last")
	s := l.add(t0.Add(50 * time.Millisecond))
	assert.Equal(t, uint32(4), s, "the sends after the wave follow it")
}

// TestSendLogTimesEveryLog: a server may keep several logs of a client's
// requests (@nestjs/throttler's documentation sets up three); the send
// log times the next request by each it found, the one that frees last
// binding — not by the first alone (timed by its "long" log of 30 per
// 5 s only, a real one refused a request its "short" log of 10 a second
// still held, and blocked the client for a second). A refusal that
// carries one log's fields stops the timing of that one only.
func TestSendLogTimesEveryLog(t *testing.T) {
	now := t0
	g := &gate{key: "api.test", maxPause: time.Minute}
	g.quotas = []quota{{name: "short", limit: 3}, {name: "long", limit: 5}}
	for i, w := range []time.Duration{time.Second, 5 * time.Second} {
		q := &g.quotas[i]
		q.known, q.log, q.refill, q.window, q.counted = true, true, true, w, true
	}
	l := &sendLog{base: now}
	g.rl = &traits{sends: l}
	for _, ms := range []int{0, 100, 200, 1000, 1100} {
		l.admitted(l.add(now.Add(time.Duration(ms) * time.Millisecond)))
	}
	require.True(t, g.logged(0) && g.logged(1) && g.logTimes())
	// The short log frees its third newest (200 ms) a second on; the
	// long one its fifth newest (0) five seconds on: that binds.
	assert.Equal(t, now.Add(5*time.Second+spanClock), g.logFree())

	tk := &ticket{seq: l.add(now.Add(2 * time.Second))}
	short := &headers.Quota{Name: "short", Limit: 3, Remaining: 0, Reset: now.Add(3 * time.Second)}
	g.counted(0, &g.quotas[0], tk, &answer{status: 429}, short, now.Add(2*time.Second))
	assert.False(t, g.logged(0), "refused with its fields: paced from now on")
	assert.True(t, g.logged(1), "the long log is still timed")
	assert.True(t, g.timedBy(1))
	assert.False(t, g.timedBy(0))
}

// TestSendLogCountsByAnswerTimes: a server takes a request somewhere
// between its sending and its answer; a first wave taken in turn over
// 200 ms, counted by the send times alone, put a log of one second at
// two. The c-th newest, still counted, bounds the window from below by
// the time it came back; the one past it, gone, from above by the time
// it went, read when this answer came back.
func TestSendLogCountsByAnswerTimes(t *testing.T) {
	l := sendLog{base: t0}
	var wave []uint32
	for range 5 {
		wave = append(wave, l.add(t0))
	}
	for i, s := range wave { // taken in turn, 50 ms apart
		l.admitted(s)
		l.lateBy(s, t0.Add(time.Duration(i+1)*50*time.Millisecond))
	}
	probe := l.add(t0.Add(1100 * time.Millisecond))
	// Three counted, the probe included: the two newest of the wave are
	// still in (taken by 250 and 200 ms), the third newest is gone.
	var b logBounds
	l.count(&b, probe, 3, 0, t0.Add(1110*time.Millisecond))
	assert.Equal(t, 900*time.Millisecond, b.lo, "the older of the two came back 900 ms before the probe went")
	assert.Equal(t, 1110*time.Millisecond, b.hi, "the third newest went 1,110 ms before this answer")
	assert.Equal(t, time.Second, b.window())
}
