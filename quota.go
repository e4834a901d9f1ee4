package throttle

import (
	"math"
	"strings"
	"time"

	"github.com/throttlekit/throttle/headers"
)

// maxQuotas is the most quotas one partition keeps track of; servers report
// one to four. Quotas past it are ignored.
const maxQuotas = 8

// quota is one of a partition's quotas: what the server said of it (its
// word: the tightest bounds its answers allow), what kind of quota its
// answers show it to be (its shape: a fixed window, a bucket that
// refills, a sliding window or log), how long its windows last from their
// first request (span), and what the requests on the wire have claimed of
// it since. Its methods named like queries change nothing; apply, claim
// and unclaim do.
//
// A gate keeps one for every quota its server reports, and a Transport a
// gate or two for every host it calls: the fields are laid out so that
// the flags share words, and the times that need no time.Time of their
// own are kept as nanoseconds (said, span).
type quota struct {
	name  string
	limit int64 // -1: the server did not say
	word
	shape
	span span // how long a window lasts from its first request

	claimed int64 // units claimed by requests on the wire
	// avg is the average declared cost of recent requests (0: none yet);
	// after, the units sent since the window's reset passed (the
	// new-window test of apply). Both stop at math.MaxInt32, far beyond
	// any window's count (four bytes each keep a quota in 240).
	avg, after int32
}

// word is what the server's answers said of a quota, as the tightest
// bounds they allow: what remains (the least said, as of at), when the
// window ends or a refilling quota is full, and how it wrote that.
type word struct {
	rmin  int64     // the least the server said remains, as of at
	ver   int64     // the gate's answer count when rmin was set
	at    time.Time // when rmin was said
	reset time.Time // the window's end, or when a refilling quota is full

	// full: when a refilling quota is full (see refill); until a quota
	// is found to refill, when bucket's sample answer said it would be.
	full  time.Time
	said  wallTime // the reset the server last wrote, as it wrote it
	ahead wallTime // the furthest reset told finer than the second that its answers wrote (aheadStep)

	known   bool  // rmin, at, reset and full hold the server's word
	guessed bool  // reset is our guess (the server's had passed): no pacing
	fine    bool  // the server wrote a reset finer than the second
	heard   uint8 // answers applied, up to 255 (only "more than one" is asked)
	kept    uint8 // answers, up to 255, that wrote ahead (aheadStep)
	rises   bool  // more remained in a later answer of the same window: not spread (pace)
	// restarts: a refusal pushed the window's end on, and every answer
	// fit a window that every request restarts (shape.stretch): each
	// pushes the end a window on (Flask-Limiter's elastic window), so the
	// end follows our last request (restartedBy, gate.restarted), not
	// the window's first.
	restarts bool
	unit     unitKind // what headers.Quota.Unit says q counts
}

// shape is what a quota's answers show it to be: what it counts (unit),
// whether it refills continuously (a bucket, or a sliding window modelled
// as one: refill), and for a sliding window, its length and how far under
// its limit it is paced.
type shape struct {
	// Sliding-window detection: the window's length (quota.after counts
	// the units sent since the last reset passed).
	window time.Duration
	reach  time.Duration // sliding: the furthest ahead a reset of its was, when it said it (the window is at least that); else bucket's time a unit
	// slack: requests per window under its limit a sliding window is
	// paced (pace), searched down from slidingMargin (slide). Until q
	// is found to slide (slides sets it), it holds instead the furthest
	// ahead of its answer, in seconds, a reset of q was, told finer than
	// the second (reachTo, stillCounted): the two never matter at once.
	slack      float32
	slid       int16  // successes at this slack, up to slackRun
	bucketUsed uint16 // the units spent the answer bucket samples said, up to 65535; 0: no sample. A rated bucket's (rates): what it holds, full

	// refill: the quota refills continuously (OpenAI's and Anthropic's
	// buckets, a sliding window), so limit−rmin come back evenly from at to
	// full, rather than all at reset.
	refill bool
	// log: its resets are no fixed window's ends, or its count fell at
	// the same reset (fell): it counts exactly, as a sliding log does
	// (slide). Set while refill is not: the first request after its end,
	// told to the millisecond, found most of it still counted
	// (stillCounted): a sliding log once the send log begun then holds a
	// window's worth of our sends (gate.counted).
	log     bool
	settled bool // a refusal ended the search for its slack (slide)
	counted bool // its window is the one the requests its answers counted bound (gate.counted), not reach's
	// stretch: whether it is a window every request restarts (restarts).
	stretch stretch
}

// wallTime is a time a server wrote, in Unix nanoseconds; 0 is the zero
// time. Such a time carries no monotonic reading (or one only of when it
// was read), so eight bytes hold all of it that is compared.
type wallTime int64

func wallOf(t time.Time) wallTime {
	if t.IsZero() {
		return 0
	}
	return wallTime(t.UnixNano())
}

func (w wallTime) time() time.Time {
	if w == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(w))
}

// unitKind is what a quota counts, as far as the gate cares: read once from
// headers.Quota.Unit when an answer is applied, not compared as a string on
// every request.
type unitKind uint8

const (
	unitRequests   unitKind = iota // "requests", or nothing said
	unitConcurrent                 // "concurrent-requests": requests in flight
	unitOther                      // tokens, points, bytes...
)

// unitOf reads a headers.Quota.Unit.
func unitOf(u string) unitKind {
	switch u {
	case "", "requests":
		return unitRequests
	case "concurrent-requests":
		return unitConcurrent
	}
	return unitOther
}

// countsRequests reports whether every request spends one unit of q unless
// it declares otherwise: q counts requests, or nothing says what it counts.
func (q *quota) countsRequests() bool { return q.unit != unitOther }

// concurrent reports whether q is a limit on requests in flight (the IETF
// draft's concurrent-requests unit).
func (q *quota) concurrent() bool { return q.unit == unitConcurrent }

// charge is what a request declaring c spends of q: its declared cost;
// else 1 if q counts requests; else, for a quota named "tokens", the sum of
// the request's declared *-tokens costs (Anthropic's tokens quota is its
// input and output tokens' tightest); else the average of recent
// declarations (1 before any).
func (q *quota) charge(c *cost) int64 {
	if u, ok := c.of(q.name); ok {
		return u
	}
	if q.countsRequests() {
		return 1
	}
	if strings.EqualFold(q.name, "tokens") {
		sum, found := int64(0), false
		for d := c; d != nil; d = d.next {
			if len(d.quota) > 7 && strings.EqualFold(d.quota[len(d.quota)-7:], "-tokens") {
				sum, found = sum+d.units, true
			}
		}
		if found {
			return sum
		}
	}
	return max(int64(q.avg), 1)
}

// tooBig reports whether n units can never fit in q.
func (q *quota) tooBig(n int64) bool { return q.known && q.limit > 0 && n > q.limit }

// refilled is how many units have come back since at. Integer units, the
// fraction dropped.
func (q *quota) refilled(now time.Time) int64 {
	if !q.refill || q.limit <= q.rmin || !now.After(q.at) {
		return 0
	}
	if !now.Before(q.full) {
		return q.limit - q.rmin
	}
	return int64(float64(q.limit-q.rmin) * float64(now.Sub(q.at)) / float64(q.full.Sub(q.at)))
}

// avail is how many units q allows now, less what is claimed. inflight is
// the partition's requests on the wire: each may spend a unit of a quota
// that counts requests, even one sent before the quota was known.
func (q *quota) avail(now time.Time, inflight int) int64 {
	claimed := q.claimed
	if q.countsRequests() {
		claimed = max(claimed, int64(inflight))
	}
	if q.concurrent() {
		return q.limit - claimed
	}
	return q.rmin + q.refilled(now) - claimed
}

// readyAt is when n more units fit in q: now if they do; the time enough
// will have refilled; the window's reset (then the quota is stale and a
// probe asks again); or zero when only an answer can free them (they are
// claimed by requests on the wire).
//
// A sliding window is paced (pace), not counted: its remaining is a
// rounded weighted count that says 0 while the pace keeps it under its
// limit.
func (q *quota) readyAt(now time.Time, n int64, inflight int) time.Time {
	if !q.known || q.sliding() || q.avail(now, inflight) >= n {
		return now
	}
	switch {
	case q.concurrent():
		return time.Time{}
	case q.refill:
		claimed := q.rmin + q.refilled(now) - q.avail(now, inflight)
		if n+claimed > q.limit || !q.full.After(q.at) {
			return time.Time{}
		}
		need := float64(n + claimed - q.rmin) // units to have refilled since at
		span := float64(q.full.Sub(q.at)) / float64(q.limit-q.rmin)
		return q.at.Add(time.Duration(need*span) + 1)
	}
	if !now.Before(q.reset) {
		// The window's end has passed, and the room it had left is not
		// asked about again yet (askAgain): what fits in it goes, what
		// does not waits for that. (Let through, a guess a few seconds
		// short of GitHub's ten-second GraphQL window put ten requests
		// into the old window at once, one run in thirty.)
		return q.askAt(now, inflight)
	}
	return q.reset
}

// pace is how long to hold the next request after one claimed n of q,
// leaving a: the units left, spread evenly until the reset, once they are
// a tenth of the limit or less. Refilling quotas pace themselves (readyAt).
//
// A sliding window is paced at all times, slidingMargin under its limit
// per window: what it counts weighs on it for two windows, so a burst of
// what it says remains is paid for by a stall. A sliding log (log) is
// not, while its last answer says some remain: it counts each request
// once, for one window.
func (q *quota) pace(now time.Time, n int64, inflight int) time.Duration {
	if q.sliding() && q.limit > 1 {
		if q.log && q.left(inflight) >= n {
			// A log counts exactly: what it said remains is free now
			// (claimed includes this request's n; n more fit), and,
			// paced, a burst it allows would be spread for good (the
			// send log, once it times the quota, keeps the spacing it
			// finds). Spent, the next waits for the send log
			// (gate.logFull).
			return 0
		}
		return time.Duration(float64(q.window) * float64(n) / (float64(q.limit) - float64(q.slack)))
	}
	if !q.known || q.refill || q.guessed || q.rises || q.concurrent() || n <= 0 {
		return 0
	}
	a := q.avail(now, inflight)
	if a <= 0 || !low(a, q.limit) {
		return 0
	}
	// Spread until the earliest the window may end, never past it: a
	// unit held beyond the end is a unit the window never used. A window
	// that ends within spreadMin is not spread at all: spreading buys no
	// throughput (every unit is spent by the end either way), only
	// smoothness where the wait at zero would be long — and holding the
	// last units of a one-second window costs a whole window's worth when
	// they are a job's last, and a log's (whose entries each stay a
	// window) what it holds in the next window too.
	left := q.earliest().Sub(now)
	if left <= spreadMin {
		return 0
	}
	return time.Duration(float64(left) * float64(n) / float64(a+n))
}

// earliest is the earliest moment the window q follows may end: its
// reset, less the second of rounding a reset written in whole seconds
// may hide.
func (q *quota) earliest() time.Time {
	if !q.fine {
		return q.reset.Add(-time.Second)
	}
	return q.reset
}

// spreadMin is the least time to a window's end over which its last
// units are spread (pace): windows of ten seconds or less are not (the
// first answer of one told finer than the second puts its end a little
// beyond ten seconds; one in whole seconds, earliest, a second short).
// At five seconds, a window of five whose reset lay resetSlack beyond
// was spread: this project's sliding log at 10 per 5 s, 1.13x
// (TestServerModel), and
// koa-ratelimit's over Redis at 20 per 10 s drew 43 refusals where it
// draws 1 (TestShortWindowsAreNotSpread).
const spreadMin = 11 * time.Second

// slidingMargin is how many requests per window under its limit a
// sliding window is paced: its weighted count is rounded to the nearest
// request (go-chi/httprate), so a count of limit−0.5 is already refused.
const slidingMargin = 0.6

// slackMin is the least slack (quota.slack) the search goes down to:
// a sliding log (koa-ratelimit's over Redis) counts exactly, and takes
// its limit per window, but the way to it varies.
const slackMin = 0.1

// slide applies an answer to a request sent since the last pause to a
// sliding window's slack, which paces it (pace): slidingMargin, what a
// weighted count rounded to the nearest request needs (go-chi/httprate),
// costs a sliding log, which counts exactly, a tenth of its rate at 5
// per window. So a window whose resets show it is a log (quota.log) has
// its slack searched, as a pace is (aimd): halved after every two
// windows' worth of successes, down to slackMin; a refusal doubles it
// (at most slidingMargin) and ends the search.
func (q *quota) slide(refused bool) {
	if !q.sliding() || !q.log {
		return
	}
	switch {
	case refused:
		q.slack, q.slid, q.settled = min(2*q.slack, slidingMargin), 0, true
	case q.settled:
	default:
		if q.slid++; int64(q.slid) >= min(2*q.limit, slackRun) {
			q.slack, q.slid = max(q.slack/2, slackMin), 0
		}
	}
}

// offWindows reports whether d, the step between two resets of a sliding
// window of length w, is no whole number of windows: exactly, for resets
// in whole seconds; within sameEnd, for resets told finer (placed by
// when each answer arrived).
func offWindows(d, w time.Duration, fine bool) bool {
	if !fine {
		return d != 0 && d%w != 0
	}
	r := d.Abs() % w
	return min(r, w-r) > sameEnd
}

// sameEnd is how far apart two answers' resets, told to the
// millisecond, may be and still be read as the same window's end
// (apply): a reset told as a time from the answer is placed by when the
// answer arrived, and the way back of two answers differs by the jitter
// of a round trip.
const sameEnd = 20 * time.Millisecond

// slackRun bounds the successes that move a sliding log's slack a step
// (slide): two windows' worth of a large limit is more than a fraction
// of a request needs to be proven by.
const slackRun = 1 << 14

// bucket reports whether s, an answer read at now whose reset is told
// finer than the second, shows q to be a bucket (a token or leaky
// bucket, GCRA) that refills continuously: its time until full grows
// with what is spent, at one time a unit. It compares s with a sample
// answer of the same bucket (whose full time has not come) that said
// half as much spent or less: a bucket's two say the same time a unit,
// within a quarter. A fixed window's or a sliding log's reset does not
// grow with what is spent (twice as much spent in the same time to the
// reset is half the time a unit), nor does a sliding window's "whole
// again". The sample, kept in full, reach and bucketUsed until q is
// found to refill, is the answer with the least spent since the last
// sample's full time, or since more came back than a bucket of the
// sample's time a unit can refill (rose): a window that turned.
func (q *quota) bucket(s *headers.Quota, sent, now time.Time) bool {
	if s.Limit <= 0 || s.Remaining < 0 || s.Remaining >= s.Limit || !s.Reset.After(now) || wholeSeconds(s.Reset, now) {
		return false
	}
	used := s.Limit - s.Remaining
	per := s.Reset.Sub(now) / time.Duration(used)
	rose := q.bucketUsed > 0 && q.rose(s.Remaining, sent, now)
	switch {
	case q.bucketUsed > 0 && !rose && now.Before(q.full) && used >= 2*int64(q.bucketUsed):
		if d := per - q.reach; d.Abs() <= q.reach/4 {
			return true
		}
	case q.bucketUsed == 0 || rose || !now.Before(q.full) || used < int64(q.bucketUsed):
		q.bucketUsed, q.reach, q.full = uint16(min(used, 65535)), per, s.Reset
	}
	return false
}

// rose reports whether an answer saying remaining, to a request sent
// after the answer q last learned from came back (so decided after it),
// says more than a bucket refilling a unit each reach (a quarter slower,
// and one) can have got back since that answer's request was sent (at
// most a round trip like this one's before it came back): the window
// that answer spoke of has turned. (A fixed window of 20 a second on a
// loaded machine: the next window's answers came back a few milliseconds
// before its end as read from a reset told relative to an answer, and one
// of them, 3 spent against the sample's 1 in the window before, said
// 333 ms a unit against 393, though that window had said none remained
// 380 ms earlier. It was paced as a bucket emptied for 5.5 s: bench's
// TestTransportAgainstOurServer took 6.2 s where 4.2 s were enough.)
// Answers to requests on the wire together say nothing of each other's
// order.
func (q *quota) rose(remaining int64, sent, now time.Time) bool {
	if q.at.IsZero() || sent.Before(q.at) || q.reach <= 0 {
		return false
	}
	back := float64(now.Sub(q.at)+now.Sub(sent)) / float64(q.reach) * 5 / 4
	return float64(remaining) > float64(q.rmin)+1+back
}

// narrow sets a sliding window's length to w, shorter than its resets
// made it (gate.counted): what remains comes back within w.
func (q *quota) narrow(w time.Duration) {
	q.window, q.counted = w, true
	q.full = q.at
	if q.limit > q.rmin && q.limit > 0 {
		q.full = q.at.Add(time.Duration(float64(w) * float64(q.limit-q.rmin) / float64(q.limit)))
	}
}

// slides takes q for a sliding window of length w (a log, when log says
// it counts exactly), modelled as a bucket refilling limit per window
// (apply), its slack searched from slidingMargin (slide).
func (q *quota) slides(w time.Duration, log bool) {
	q.window, q.log = w, log
	q.refill, q.slack, q.slid, q.settled, q.reach, q.bucketUsed = true, slidingMargin, 0, false, 0, 0
}

// left is what q's last answer said remains, less what the requests on
// the wire since (inflight of them) claim: what a sliding log has free
// now, no refill counted (a log frees a place only when an entry leaves
// it, which its answers do not say).
func (q *quota) left(inflight int) int64 { return q.rmin - max(q.claimed, int64(inflight)) }

// sliding reports whether q was found to be a sliding window that reports
// the current fixed window's end as its reset.
func (q *quota) sliding() bool { return q.refill && q.window > 0 }

// lasts is how long a window every request restarts (restarts) lasts
// after the last request reached it: the length its answers allow
// (stretch), or else span's upper bound; 0 if unknown.
func (q *quota) lasts() time.Duration {
	if w := q.stretch.window(); w > 0 {
		return w
	}
	return q.span.hi
}

// renew opens the next window of q, a window every request restarts
// (restarts) whose end has passed: nothing reached it for a window, so
// it is empty, and its end follows the requests sent from now
// (restartedBy).
// It reports whether it did; other windows are asked about (askAgain).
func (q *quota) renew(now time.Time) bool {
	if !q.restarts || q.limit <= 0 || q.stretch.window() == 0 {
		return false
	}
	q.rmin, q.at, q.reset, q.guessed = q.limit, now, now.Add(q.lasts()), false
	return true
}

// restartedBy pushes the end of q, a window every request restarts
// (restarts), a window past now, when a request was let through: it
// reaches the server later still, and its answer says when by
// (gate.restarted).
func (q *quota) restartedBy(now time.Time) {
	if w := q.lasts(); q.restarts && q.known && w > 0 {
		if end := now.Add(w); end.After(q.reset) {
			q.reset = end
		}
	}
}

// restart takes q for a window every request restarts (restarts): it
// is no sliding window, whatever its pushed resets looked like.
func (q *quota) restart() {
	q.restarts = true
	if q.sliding() {
		q.refill, q.window, q.reach, q.log, q.counted = false, 0, 0, false, false
	}
}

// low reports whether a quota is low enough to pace: a tenth of the limit
// or less (when the limit is unknown, ten units or fewer).
func low(avail, limit int64) bool {
	if limit > 0 {
		return avail*10 <= limit
	}
	return avail <= 10
}

// claim records that a request sent at now claimed n units; declared says
// the request declared n, which then teaches q the average cost.
func (q *quota) claim(now time.Time, n int64, declared bool) {
	q.claimed += n
	if q.known && !now.Before(q.reset) {
		q.after = int32(min(int64(q.after)+n, math.MaxInt32))
	}
	if declared && !q.countsRequests() {
		n = min(n, math.MaxInt32)
		if q.avg == 0 {
			q.avg = int32(n)
		} else {
			q.avg += int32((n - int64(q.avg)) / 8)
		}
	}
}

// unclaim gives back n units when the request's answer (or failure) came.
func (q *quota) unclaim(n int64) { q.claimed = max(q.claimed-n, 0) }

// askAgain reports whether q, a window whose reset has passed (stale), is to
// be asked about again now. One with no room left is, at once: its reset
// is when the server's next window opens (span.end), and the probe that
// finds it goes then. One with room to spare is not, for the way back
// (span.ahead) that the reset was brought forward by: the requests sent
// since then open the next window, and their answers, on their way, say
// what it holds (a probe would hold every other request for a round trip,
// each window: a client 330 ms away that used a fifth of express's 150
// per 2 s was held to 0.72 of its own pace).
func (q *quota) askAgain(now time.Time, inflight int) bool {
	return !now.Before(q.askAt(now, inflight))
}

// askAt is when q, a window quota, is to be asked about again once its
// reset has passed (askAgain): at the reset when it is the server's or
// nothing is left, else the way back after it.
func (q *quota) askAt(now time.Time, inflight int) time.Time {
	if ahead := q.span.ahead(); ahead > 0 && q.span.guess(!q.fine) > 0 && q.avail(now, inflight) > 0 {
		return q.reset.Add(ahead)
	}
	return q.reset
}

// stale reports whether what the server said of q no longer holds: a
// window quota whose reset has passed.
func (q *quota) stale(now time.Time) bool {
	return q.known && !q.refill && !q.concurrent() && !now.Before(q.reset)
}

// refills reports whether an answer's quotas (qs, read from h) refill
// continuously: OpenAI's (x-ratelimit-reset-requests/-tokens, a duration
// until full) and Anthropic's (anthropic-ratelimit-*, "continuously
// replenished"), as their documentation says. The fields are looked for
// only when a quota is named like theirs (requests, tokens, *-tokens).
func refills(h map[string][]string, qs []headers.Quota) bool {
	named := false
	for i := range qs {
		if n := qs[i].Name; n == "requests" || n == "tokens" || strings.HasSuffix(n, "-tokens") {
			named = true
			break
		}
	}
	if !named {
		return false
	}
	// The keys as net/http canonicalizes them: a lookup each, before a
	// walk over every key in any spelling.
	for _, k := range refillKeys {
		if _, ok := h[k]; ok {
			return true
		}
	}
	for k := range h {
		if len(k) >= 20 && strings.EqualFold(k[:20], "anthropic-ratelimit-") ||
			strings.EqualFold(k, "x-ratelimit-reset-requests") || strings.EqualFold(k, "x-ratelimit-reset-tokens") {
			return true
		}
	}
	return false
}

// refillKeys are the fields of refilling quotas in their canonical
// spelling: OpenAI's resets, and Anthropic's for its usual quotas.
var refillKeys = [...]string{
	"X-Ratelimit-Reset-Requests", "X-Ratelimit-Reset-Tokens",
	"Anthropic-Ratelimit-Requests-Reset", "Anthropic-Ratelimit-Tokens-Reset",
	"Anthropic-Ratelimit-Input-Tokens-Reset", "Anthropic-Ratelimit-Output-Tokens-Reset",
}

// apply learns what the server said of q in an answer to a request sent
// when the gate had had ver answers (fresh: no answer learned from since was
// to a later request), at now; reset is the server's reset as resetFor read
// it, guessed when it is our guess. It reports whether the quota is at
// zero with a window reset to pause until.
func (q *quota) apply(s *headers.Quota, refill, fresh bool, reset time.Time, guessed, timed bool, ver int64, sent, now time.Time) {
	if q.heard < 255 {
		q.heard++
	}
	if !s.Reset.IsZero() && !wholeSeconds(s.Reset, now) {
		q.fine = true
	}
	q.unit = unitOf(s.Unit)
	q.limit = s.Limit
	if q.concurrent() {
		q.known = q.limit > 0
		return
	}
	if !refill && !q.refill && q.fine && q.bucket(s, sent, now) {
		// Found to refill: a bucket's from now on, a unit back each reach.
		q.refill, q.bucketUsed = true, 0
	}
	if refill || q.refill && q.window == 0 {
		if s.Limit <= 0 {
			// A bucket of no size says nothing we could pace by.
			q.known = false
			return
		}
		if !refill && q.bucketUsed > 0 {
			// A rated bucket (rated) holds no more than the most its
			// answers said remain, and one.
			held := max(int64(q.bucketUsed), s.Remaining+1)
			q.bucketUsed = uint16(min(held, math.MaxUint16))
			q.limit = min(s.Limit, held)
		}
		// A bucket's level only grows between two of our requests, so the
		// freshest word is the truth; an older one counts only if it says
		// less than we project.
		at := now
		if !refill && q.reach > 0 && timed && sent.Before(now) {
			// A bucket found by its answers: its level as of the
			// server's decision, the way back taken as half the
			// shortest round trip seen (a shaper holds its answers: half
			// of theirs put a request too many into its queue each
			// time), at most half this one's and backMax; the requests
			// let through since the one it answers was sent are counted
			// when theirs come back (spent).
			q.span.trip(sent, now)
			at = now.Add(-min(q.span.shortest(), now.Sub(sent), 2*backMax) / 2)
		}
		if !q.known || fresh || s.Remaining < q.rmin+q.refilled(at) {
			q.rmin, q.at, q.ver, q.known, q.refill, q.guessed = s.Remaining, at, ver, true, true, false
			q.reset, q.full = reset, reset
			if !refill && q.reach > 0 {
				// A bucket found by its answers (bucket): full once
				// what is spent has come back, a unit each reach (its
				// reset may say when one more is free, not all).
				q.full = at.Add(time.Duration(q.limit-s.Remaining) * q.reach)
				q.span.openAt = sent // the anchor's request (spent)
			}
			if q.full.IsZero() || s.Remaining >= q.limit {
				q.full = at
			}
		}
		return
	}
	if q.sliding() {
		// A sliding window: model it as a bucket refilling limit per
		// window. Its window is the least step seen between its resets.
		// (Steps under a second are a reset written relative to the
		// answer's time, moving with it, not a window's.)
		// No window is shorter than the furthest ahead its resets were
		// (a sliding log's reset, its oldest entry's expiry, steps by
		// where entries fall, not by a window).
		if s.Reset.Nanosecond() == 0 {
			q.reach = max(q.reach, s.Reset.Sub(now))
			// Windows are whole seconds: one that reached 1.07 s
			// ahead is two seconds long.
			if w := (q.reach + time.Second - 1).Truncate(time.Second); s.Window <= 0 && !q.counted && w > q.window {
				q.window = w
			}
		}
		prev, step := q.said, true
		if q.fine && q.ahead != 0 {
			// Told finer than the second (aheadStep), only the
			// furthest reset steps; a nearer one is an answer at zero
			// saying when one more is free.
			prev = q.ahead
			if step = s.Reset.Sub(prev.time()) > sameEnd; step {
				q.ahead = wallOf(s.Reset)
			}
		}
		d := s.Reset.Sub(prev.time())
		if step && prev != 0 && q.window > 0 && offWindows(d, q.window, q.fine) {
			// A reset that is no fixed window's end (those step by
			// whole windows): a log's oldest entry's expiry, which counts
			// exactly (slide). Asked of the window as it stands, before
			// a step narrows it below: koa-ratelimit's Redis log of 5
			// per 2 s stepped a second, was narrowed to a window of a
			// second, off which a step of a second is not, and was paced
			// as a sliding counter of 5 a second (16 refusals per 40
			// units, 20 ms away, answers out of order).
			q.log = true
		}
		if step && !q.log && s.Window <= 0 && prev != 0 && d >= time.Second && d < q.window && d >= q.reach {
			// (Not a log's: its resets step where its entries fall.
			// koa-ratelimit's Redis log of 250 per 5 s, read by them
			// as one of 4 s, drew 10 refusals: TestLargeLogsAreTimed.)
			q.window = d
		}
		if !q.known || fresh || s.Remaining < q.rmin+q.refilled(now) {
			// As a bucket's: the freshest word, or an older one that
			// says less than we project. Answers to requests sent
			// together come back in any order, and the one counted
			// last says the least (Flask-Limiter's moving window,
			// nine sent at once: 18 to 10 remaining, and the last
			// read, 16, let ten go where ten remained).
			q.rmin, q.at, q.ver, q.reset, q.guessed, q.known = s.Remaining, now, ver, reset, guessed, true
			q.full = now
			if s.Limit > s.Remaining && s.Limit > 0 {
				q.full = now.Add(time.Duration(float64(q.window) * float64(s.Limit-s.Remaining) / float64(s.Limit)))
			}
		}
		q.said = wallOf(s.Reset)
		return
	}
	if s.Limit < sendLogSize && s.Remaining > q.rmin && !q.fine {
		if w, log := q.fell(s, sent); w > 0 {
			// Its count fell while the end it wrote stayed put: a fixed
			// window's count only grows until its end, and the next
			// window's reset is another; this one forgets what it counted
			// as time passes (koa-ratelimit's log over Redis, whose reset is
			// its oldest entry's expiry rounded down to the second).
			q.slides(w, log)
			q.apply(s, false, fresh, reset, guessed, timed, ver, sent, now)
			return
		}
	}
	if q.fine { // (asked here, not in aheadStep: GitHub's answers are spared a call)
		if w := q.aheadStep(s, now); w > 0 {
			// Its reset stepped a whole window on while the one it
			// replaced was still over half a window away: the end it
			// says is a later window's than the one counting (this
			// project's sliding window says when it is empty, two
			// windows on), and the count that stepped is the epoch's
			// window turning. A sliding counter of that window.
			q.slides(w, false)
			q.apply(s, false, fresh, reset, guessed, timed, ver, sent, now)
			return
		}
	}
	ended := !now.Before(q.reset) // the window we knew has passed
	if ended && q.said != 0 && s.Reset.After(q.said.time().Add(time.Second/2)) {
		// A new window. A fixed window starts empty: what remains is the
		// limit less what reached it since, at most what we sent since the
		// old reset (and the probe, and a few sent just before). Clearly
		// less than that (by more than a tenth of the limit, and one), and
		// the previous window still weighs in: a sliding window whose reset
		// is the current fixed window's end (go-chi/httprate), written in
		// epoch seconds. (A reset written relative to the answer — a
		// bucket's next permit, a sliding log's next free slot — moves
		// with each answer: nothing to tell a window's length by.)
		if s.Limit > 0 && !q.restarts && s.Remaining+int64(q.after) < s.Limit-1-s.Limit/10 && s.Reset.Nanosecond() == 0 && q.said.time().Nanosecond() == 0 {
			// Its window: as the server says, or the step between the
			// resets it wrote (not ours, adjusted for sloppy servers).
			w := s.Window
			if w <= 0 {
				w = reset.Sub(q.reset)
				if d := s.Reset.Sub(q.said.time()); q.said != 0 && d > 0 {
					w = d
				}
			}
			q.slides(w, false)
			q.apply(s, false, fresh, reset, guessed, timed, ver, sent, now) // sets q.said
			return
		}
		q.after = 0
	}
	// The same reset as the last answer's, and none remaining, or fewer
	// than the least any answer said: the same window, however long ago
	// we thought it would end (a refused probe finds the window it was
	// sent too early for; a window longer than span guessed goes on
	// counting down).
	spent := q.rmin <= 0 // the window was spent before this answer: a request sent now was a probe
	// (A reset told to the millisecond is the same within the jitter of
	// the way back, sameEnd; one in whole seconds within its rounding.)
	doubt := time.Second
	if q.fine {
		doubt = sameEnd
	}
	same := q.heard > 1 && q.said != 0 && (s.Remaining == 0 || s.Remaining < q.rmin) &&
		s.Reset.Sub(q.said.time()).Abs() < doubt
	stale := q.known && !q.refill && ended // q.stale(now): q is not concurrent here
	// A window's count only falls: a fresher answer that says more
	// remains speaks of a new window.
	if fresh && q.known && q.fine && !ended && s.Remaining > q.rmin && s.Limit > 0 &&
		s.Reset.Sub(q.said.time()).Abs() <= sameEnd {
		// More remains than before, and the window's end has not moved:
		// the count falls within a window (a weighted sliding window
		// that says when its count is all gone): what remains comes back
		// before the reset, so it is not spread until then (pace).
		q.rises = true
	}
	next := (!q.known || stale) && !same || fresh && s.Remaining > q.rmin
	if next || fresh || s.Remaining < q.rmin {
		q.rmin, q.ver, q.at = s.Remaining, ver, now
	}
	// Every answer of one window bounds its end from above (a reset
	// rounded up, or exact): the window ends by the earliest of them,
	// whichever answer said it last. A guess gives way to the server's
	// word, never the other way round.
	var said time.Time // a reset in whole seconds, read as rounded up
	if q.heard > 1 && !q.fine && !guessed {
		said = s.Reset
	}
	// span learns windows of seconds to minutes; one whose reset is
	// further away (GitHub's hour) it could bring forward by a second of
	// rounding at its very end, and the work is spared (a window that
	// came within spanFar later is not learned either: its opening was
	// not seen).
	if said.IsZero() || said.Unix()-now.Unix() < spanFar {
		first := s.Remaining == s.Limit-1 || s.Limit <= 0
		if first && !next && q.rmin < s.Remaining && q.span.openAt.IsZero() && q.said == wallOf(s.Reset) {
			// The answer to the request that opened this window, come back
			// after others of it that said less remains (answers that come
			// back together are learned in any order).
			q.span.opened(sent, now)
		}
		q.span.learn(next, first, !q.fine, spent, timed, sent, said, now)
		if said.IsZero() && q.heard > 1 && !q.fine && q.span.down() {
			// A reset that has passed while nothing remains (resetFor's
			// guess replaced it), read as rounded down: the window still
			// ends within the second after it.
			q.span.boundBy(s.Reset)
		}

		if end := q.span.end(!q.fine); !end.IsZero() && !q.restarts {
			if t, ok := q.span.downTo(end, s.Reset); ok {
				// A reset rounded down: the window's end lies past it (the
				// server's guessed, or ours made of it: later or earlier).
				reset = t
			} else if !guessed && end.Add(spanGain).Before(reset) {
				reset = end
			}
		}
	} else if next {
		q.span.openAt, q.span.rtt = time.Time{}, 0 // not learned: this window's opening is not known
	}
	switch {
	case next, q.guessed && !guessed:
		q.reset, q.guessed = reset, guessed
	case same && ended && q.fine && !guessed && reset.After(q.reset):
		// A probe found the window we took to have ended still spent:
		// it ends when the server says to the millisecond (a sliding
		// log's oldest entry's expiry), not when we thought. (Else the
		// past reset stays, and each probe after it is refused: this
		// project's sliding log, 5 and 6 refusals of 120.)
		q.reset = reset
	case !guessed && !q.guessed && !q.restarts && reset.Before(q.reset):
		q.reset = reset
	case guessed && reset.After(q.reset):
		// Guesses (a reset that passed while units remained, a probe
		// time while none do) bound nothing: the later holds, "not yet".
		q.reset, q.guessed = reset, true
	}
	q.known = true
	q.said = wallOf(s.Reset)
}

// counts reports whether an answer s, read at now, can only count q
// down: q is a fixed window in whole seconds known from answers before,
// its end not yet passed, and s says it ends after far (Unix seconds:
// beyond the horizon maxPause and spanFar, so within brings its reset to
// the horizon, and span does not learn from it), more than half its
// limit remaining and no more than q holds. apply would pass every branch
// but its last by; count does what that does, in a tenth of the
// instructions: GitHub's hourly 5,000 answer every request so for most
// of the hour (TestCountMatchesApply).
func (q *quota) counts(s *headers.Quota, refill bool, far int64, now time.Time) bool {
	return !refill && q.known && !q.refill && !q.fine && !q.guessed && !q.restarts && q.heard > 1 &&
		s.Remaining > 0 && s.Remaining <= q.rmin && 2*s.Remaining > s.Limit &&
		s.Reset.Nanosecond() == 0 && s.Reset.Unix() > far && q.unit == unitOf(s.Unit) &&
		!q.concurrent() && now.Before(q.reset)
}

// count applies an answer s that counts said only counts q down, as apply
// would: fresh and ver as apply's. apply would lower q's reset to the
// horizon, where within put s's: it lies there already, as apply set it
// no later than an earlier horizon, and only a window every request
// restarts (not counted) is pushed on since (restartedBy, renew).
func (q *quota) count(s *headers.Quota, fresh bool, ver int64, now time.Time) {
	if q.heard < 255 {
		q.heard++
	}
	q.limit = s.Limit
	if fresh || s.Remaining < q.rmin {
		q.rmin, q.ver, q.at = s.Remaining, ver, now
	}
	q.said = wallOf(s.Reset)
}

// aheadStep reports the window of q, whose resets are told finer than the
// second, when an answer s, read at now, shows that q's reset is a later
// window's end than the one that counts: the furthest reset its answers
// wrote (ahead) was written by two answers or more (kept), then one wrote
// a reset a whole number of seconds further on while the one it replaces
// was still more than half that step away. (A fixed window's reset steps
// when it has passed; a bucket's or a log's moves with every answer.)
// Nearer resets are passed over: an answer to an earlier request, or one
// at zero that says when one more unit is free. 0 if s shows no such
// step.
func (q *quota) aheadStep(s *headers.Quota, now time.Time) time.Duration {
	if q.refill || q.restarts || s.Limit <= 0 || s.Reset.IsZero() {
		q.ahead, q.kept = 0, 0
		return 0
	}
	r := wallOf(s.Reset)
	d := time.Duration(r - q.ahead)
	switch {
	case q.ahead == 0:
		q.ahead, q.kept = r, 1
		return 0
	case d.Abs() <= sameEnd:
		if q.kept < 255 {
			q.kept++
		}
		return 0
	case d < 0:
		return 0
	}
	old, kept := q.ahead.time(), q.kept
	q.ahead, q.kept = r, 1
	w := d.Round(time.Second)
	if kept < 2 || w < time.Second || (d-w).Abs() > sameEnd || !now.Before(old.Add(-w/2)) {
		return 0
	}
	return w
}

// fell reports the length of q's window, when an answer s to a request
// sent at sent shows that q's count falls within a window, as no fixed
// window's does: the request left after the answer that said the least
// remains (as of at) came back, so the server counted it later, yet more
// remain, and the reset, in whole seconds, is the one that answer wrote
// (a fixed window's next one writes another). Its window is the one the
// server says, or the one span guessed from the windows so far; 0 if
// neither, or if the answer shows no fall. log says it is taken for a
// log (which counts exactly: slide). Asked only of limits the send log
// can time (sendLogSize): a large one is no exact log's.
func (q *quota) fell(s *headers.Quota, sent time.Time) (w time.Duration, log bool) {
	if q.heard < 2 || q.refill || q.fine || q.restarts || s.Remaining <= q.rmin || s.Limit <= 0 || s.Limit >= sendLogSize ||
		q.said != wallOf(s.Reset) || s.Reset.Nanosecond() != 0 || !sent.After(q.at) {
		return 0, false
	}
	if s.Window > 0 {
		return s.Window, true
	}
	if w := q.span.guess(true); w > 0 {
		return w, true
	}
	// The bounds read from its resets as rounded up left no whole second
	// between them: they are rounded down (span.readDown). The window
	// read so may be a log's, or a sliding counter's (whose weighted
	// count falls at its fixed window's reset, go-chi/httprate: taken
	// for a log, it drew 9 refusals per 120 where it draws 3): which,
	// its next resets tell (apply: offWindows).
	q.span.readDown()
	return q.span.guess(true), false
}

// span learns how long a fixed window lasts from the request that opened
// it, for servers whose windows start at a client's first request
// (express-rate-limit's MemoryStore, and many more): such a window ends
// one length after its first request arrived, which a client learns to
// within a round trip, where a reset written in whole epoch seconds
// leaves a second of doubt. Every window bounds the length: it lasted at
// least from its first request's answer to the sending of a request that
// still found it open, and at most from its first request's sending to
// the answer of the request that found the next one, or to the reset the
// server wrote (read as rounded up). Windows are configured in whole
// seconds, so once the bounds are within spanDoubt of each other the
// length guessed is the shortest whole number of seconds they allow. A
// guess a request proves too short raises the lower bound; bounds that
// cross drop the upper bound, to be learned again: the first time, the
// resets are read as rounded down from then on (the window ends within
// the second after one: koa-ratelimit's log over Redis), the second,
// as bounding nothing (windows that do not start at a request but on
// the clock).
type span struct {
	openAt time.Time     // when the current window's first request was answered; zero if unknown. A bucket found by its answers: when the request its level was read from was sent (spent)
	rtt    time.Duration // how long before openAt it was sent
	lo, hi time.Duration // the length is more than lo and at most hi (hi 0: unknown)
	// least is the shortest round trip seen, in microseconds, of timed
	// answers (timed, up to 255); distrust halves what end reads of it
	// for each probe of a spent window, sent at the end it brought
	// forward, that the old window still counted (ways). (Seven bytes
	// the struct's padding had free.)
	least    int32
	timed    uint8
	distrust uint8
	// rounding is how resets bound the length (boundBy): read as
	// rounded up, until the bounds cross; then as rounded down (the
	// window ends within the second after one); crossed that way too,
	// not at all (windows that do not start at a request).
	rounding rounding
	// floored: lo was raised last by a reset (floorBy), which a
	// server's reset may overstate, or by the ways' estimate, rather
	// than by the time a request the window counted was sent after the
	// opener's answer (learn).
	floored bool
}

// rounding is how a span reads the resets a server writes in whole
// seconds (span.rounding).
type rounding uint8

const (
	roundedUp   rounding = iota // the window ends by the reset
	roundedDown                 // within the second after it
	unbounded                   // resets bound nothing
)

// down reports whether resets are read as rounded down, or bound
// nothing.
func (p *span) down() bool { return p.rounding != roundedUp }

// loose reports whether resets bound nothing.
func (p *span) loose() bool { return p.rounding == unbounded }

// trip times the round trip of a request sent at sent (zero if
// unknown), answered at now: least keeps the shortest.
func (p *span) trip(sent, now time.Time) {
	if sent.IsZero() {
		return
	}
	if r := int32(min(now.Sub(sent)/time.Microsecond, 1<<31-1)); r > 0 && (p.least == 0 || r < p.least) {
		p.least = r
	}
	p.timed = min(p.timed, 254) + 1
}

// spanTimed is how many answers must have been timed before least is
// believed: the first are few (their least lies further above the two
// shortest ways), and a connection's first request carries its setup
// (and a server's accept queue) in its round trip.
const spanTimed = 16

// ways is what the way back of one request's answer and the way there of
// another are taken to take together: the shortest round trip seen, once
// spanTimed answers are timed, halved for each time it proved too long
// (distrust); 0 before. It is an estimate, not a bound: the shortest of a
// few sums of two jittered ways lies above the sum of the two shortest
// ways, which is why end keeps a margin (ahead).
//
// The shortest round trip bounds the two ways only if what a server
// does before it counts a request takes no time: a gateway that spends
// 10 ms authenticating before its limiter, a millisecond away, would
// have the next window's first request counted in the old one. Such a
// request tells (learn), and the bound is halved.
func (p *span) ways() time.Duration {
	return p.shortest() >> min(p.distrust, 16)
}

// shortest is the shortest round trip seen, once spanTimed answers are
// timed; 0 before. The length's lower bound counts it as the two ways
// whatever distrust says: read too long, it makes the window longer than
// it is, and the next probe later, never earlier.
func (p *span) shortest() time.Duration {
	least := time.Duration(p.least) * time.Microsecond
	if p.timed < spanTimed || least < spanWaysMin {
		return 0
	}
	return least
}

// spanWaysMin is the shortest round trip read as the two ways: below
// it, the round trip is mostly the server's own time (a loopback, a
// busy event loop), not the way there and back, and what counting by
// the server's clock could gain is under 2 % of a one-second window.
// (On a loaded loopback a round trip of a few milliseconds brought
// fastify's first window's probe 4 ms early, and it was refused.)
const spanWaysMin = 20 * time.Millisecond

// since is how long before now the current window's first request was
// sent; span.openAt must be known.
func (p *span) since(now time.Time) time.Duration { return now.Sub(p.openAt) + p.rtt }

// ahead is how much of the shortest round trip seen, least, the
// server's clock runs ahead of what its answers show (see end): all of
// it but a margin, a quarter of it or spanClock if more. The shortest
// round trip seen is the least of a few sums of two ways, each with its
// jitter, and lies above the sum of the two shortest ways by more the
// fewer they are and the more they vary: 50 ms ± 25 ms away each way (a
// real express-rate-limit behind Toxiproxy), an eighth of sixteen drew
// a refused probe one run in two; a quarter none in three.
func (p *span) ahead() time.Duration {
	ways := p.ways()
	return max(ways-max(spanClock, ways/4), 0)
}

// spanGain is how much earlier than the server's reset span's guess must
// end for the gate to act on it: a guess is worth its risk only where a
// reset in whole seconds hides much of a second, not where the server
// wrote its reset to the millisecond and the guess only rounds it.
const spanGain = 10 * time.Millisecond

// spanDoubt is how far apart span's bounds may be for a guess: two whole
// seconds fit, and a wrong guess costs one refused probe.
const spanDoubt = 2 * time.Second

// spanOver is how far past a whole second span's lower bound may lie,
// with no whole second left under its upper, for the window to be taken
// for that second (guess).
const spanOver = 200 * time.Millisecond

// spanDoubtWhole is spanDoubt where the server writes its resets in whole
// seconds: a two-second window whose reset is rounded up leaves three
// seconds of doubt, and waiting for the reset costs a second a window.
const spanDoubtWhole = 6 * time.Second

// learn applies an answer to a request sent at sent (zero if unknown),
// answered at now, that said the window ends by reset (zero: it did not
// say in whole seconds): next says it found a new window, first that it
// was the first request counted in it.
func (p *span) learn(next, first, whole, spent, timed bool, sent, reset, now time.Time) {
	if timed {
		p.trip(sent, now)
	}
	switch {
	case next:
		if !p.openAt.IsZero() {
			p.bound(p.since(now))
		}
		p.openAt, p.rtt = time.Time{}, 0
		if first {
			p.opened(sent, now)
		}
	case !p.openAt.IsZero() && !sent.IsZero():
		// Sent at sent and counted in the window, it arrived a way
		// there after sent; the window opened a way back before openAt:
		// the two ways, taken as the shortest round trip (end). A probe
		// sent after the end they brought forward, yet counted in the
		// spent window: they were less (ways, distrust).
		if spent && p.ahead() > 0 {
			if w := p.guess(whole); w > 0 && !sent.Before(p.end(whole)) && sent.Before(p.openAt.Add(w)) {
				p.distrust++
			}
		}
		// The ways are an estimate: the lower bound stands as the
		// request set it (floored false) only where the time from the
		// opener's answer alone reaches the whole second under it.
		if d := sent.Sub(p.openAt); d+p.shortest() >= p.lo {
			p.lo = d + p.shortest()
			p.floored = d < p.lo.Truncate(time.Second)
		}
	}
	p.boundBy(reset)
	if !p.openAt.IsZero() && !reset.IsZero() { // (a call spared most answers: GitHub's)
		p.floorBy(reset, sent, now)
	}
	if p.hi != 0 && p.lo >= p.hi+spanClock {
		// Crossed (by more than a server's clock tick: spanClock): the
		// resets are rounded down (koa-ratelimit's log over Redis), and
		// bound the window only by the second after them; crossed again,
		// the windows do not start at a request, and resets bound
		// nothing from now on: only the windows themselves do.
		p.hi = 0
		if p.rounding < unbounded {
			p.rounding++
		}
		p.boundBy(reset)
	}
}

// boundBy lowers the upper bound to the length a reset written in whole
// seconds allows (zero: none written): the window ends by it, or, read as
// rounded down, within the second after it.
func (p *span) boundBy(reset time.Time) {
	if reset.IsZero() || p.openAt.IsZero() || p.loose() {
		return
	}
	if p.down() {
		reset = reset.Add(time.Second)
	}
	p.bound(p.since(reset))
}

// floorBy raises the lower bound to the length a reset written in whole
// seconds (zero: none written) allows, in an answer to a request sent at
// sent and read at now: whether the server rounded it up, down or to the
// nearest, the window ends less than a second before it, and it opened
// before its first request was answered (openAt). An epoch reset is the
// server's clock's (ours, we take it, to well within the second); one
// relative to the answer was written when the server counted the
// request, after sent and after the window opened: the window is longer
// than what it says less a second, and than that from sent. Without it,
// the length guessed was the shortest whole number of seconds past what
// the window had been seen to hold: express's legacy epoch resets over
// 5 s windows, a refused probe at 1, 2, 3 and 4 seconds into the first
// four windows, each costing a round trip of the next window. A reset a
// window later than the bounds allow (an answer of the next window read
// as of this one) raises nothing.
func (p *span) floorBy(reset, sent, now time.Time) {
	if reset.IsZero() || p.openAt.IsZero() || sent.IsZero() || p.loose() {
		return
	}
	var d time.Duration
	if reset.Nanosecond() != 0 || reset.Sub(now)%time.Second == 0 {
		// Relative to the answer (whole.go: wholeSeconds), written after
		// the window opened and after sent: more than the reset less a
		// second after either.
		d = reset.Sub(now) - time.Second + max(sent.Sub(p.openAt), 0)
	} else {
		d = reset.Add(-time.Second).Sub(p.openAt) // an epoch reset
	}
	if (p.hi == 0 || d < p.hi) && d > p.lo {
		p.lo, p.floored = d, true
	}
}

// downTo is end, span's guess of a window's end, where resets are read
// as rounded down (down) and end is later than r, the reset the server
// wrote: the window ends within the second after r, so by r plus a
// second at the latest (span's end counts from the answer to a window's
// first request, a round trip after it left). ok is false elsewhere.
func (p *span) downTo(end, r time.Time) (t time.Time, ok bool) {
	if p.rounding != roundedDown || !end.After(r) {
		return end, false
	}
	return minTime(end, r.Add(time.Second)), true
}

// readDown reads the resets as rounded down from now on, as bounds that
// cross do (learn), when a count that fell at the same reset showed a
// log's or a sliding counter's (quota.fell): the upper bound they gave,
// read as rounded up, is a second more. A probe of the first window's end that the way there
// delays into the next shows no crossing: the bounds, a fraction of a
// second apart and no whole second between them, left fell no length,
// and koa-ratelimit's log over Redis was taken for a fixed window and
// then for a sliding counter of one second (18 refusals per 40 units at
// 5 per 2 s, 200 ms of jitter, in fake time; 26 in one real-server run
// beside a CPU hog).
func (p *span) readDown() {
	if p.down() {
		return
	}
	p.rounding = roundedDown
	if p.hi != 0 {
		p.hi += time.Second
	}
}

// opened learns, when it is not known yet, when the current window's
// first request was sent (sent) and answered (now).
func (p *span) opened(sent, now time.Time) {
	if p.openAt.IsZero() && !sent.IsZero() {
		p.openAt, p.rtt = now, now.Sub(sent)
	}
}

// bound lowers the upper bound to d.
func (p *span) bound(d time.Duration) {
	if p.hi == 0 || d < p.hi {
		p.hi = d
	}
}

// guess is the window's length as span can tell, or 0; whole says the
// server writes its resets in whole seconds.
func (p *span) guess(whole bool) time.Duration {
	doubt := spanDoubt
	if whole {
		doubt = spanDoubtWhole
	}
	if p.hi == 0 || p.hi-p.lo > doubt {
		return 0
	}
	w := (p.lo/time.Second + 1) * time.Second
	if w > p.hi+spanClock {
		// No whole second between the bounds, lo just past the one
		// under hi (by spanOver at most): lo is taken for a floor that
		// a reset read as rounded up put too high (Flask-Limiter's
		// moving window writes when its log will be empty, plus a
		// second: at some phases of the clock's second its floor put a
		// window of one second at 1.035-1.174 s, no guess was left, and
		// each window was waited out to that reset, two seconds). Far
		// past it, the resets are rounded down (fell, readDown). Not a
		// lower bound a request the window counted set (floored): a
		// probe sent at that length was refused, and guessed again it
		// is refused again (koa-ratelimit's log over Redis, 5 per 2 s,
		// its resets rounded down: bounded at 1 s by the probe, at
		// 1.98 s by the next window's reset read as rounded up, and
		// probed at a second into every window).
		if w -= time.Second; w == 0 || p.lo-w > spanOver || !p.floored {
			return 0
		}
	}
	return w
}

// spanFar is how far ahead, in seconds, a reset in whole seconds may lie
// for span to learn from its answer (quota.apply).
const spanFar = 600

// spanClock is how far below a window's length span's upper bound may
// fall and still admit it: a server reads its clock to the millisecond
// (express's Date.now()), so a window that its clock began in the same
// millisecond as our first request left, a little before it, ends that
// much less than a length after it — and a bound a fraction of a
// millisecond under a whole second left no length to guess, and every
// window was waited out to its reset rounded up, a second late, whenever
// its windows crossed a whole second just so (express's legacy fields:
// 1.42× and 1.67× against the real server, 1.29–1.88× in fake time).
const spanClock = 5 * time.Millisecond

// end is when the current window ends by span's guess, or zero.
//
// The window opened when its first request reached the server, a way
// back before openAt, and the next window's first request counts from
// when it arrives there, a way there after it is sent: sent one length
// after openAt, it would reach the next window a round trip late, every
// window (at 100 ms ± 50 ms each way, windows of a second took 1.23× the
// ideal). Neither way is known alone; the shortest round trip seen
// estimates the two together (ways), so end is that much earlier, less a
// margin for the estimate's error (ahead), and a request sent then
// still reaches the next window (1.09× there, in fake time; a refused
// probe halves the estimate from then on). The length's lower bound
// counts the same ways (learn).
func (p *span) end(whole bool) time.Time {
	w := p.guess(whole)
	if w == 0 || p.openAt.IsZero() {
		return time.Time{}
	}
	return p.openAt.Add(w - p.ahead())
}

// stillCounted reports the window of q when an answer s to a request
// sent at sent, once the end q's server told to the millisecond had
// passed with nothing left, says most of the limit is still counted, at
// another end than the one it said: a fixed window starts empty at its
// end, a sliding log frees only the requests that reached it a window
// before (this project's sliding log says, at zero, when its oldest
// entry leaves). A sliding counter's count lingers too, but it said it
// would be whole again further ahead than a log would be (two windows
// after its last count; a log, one after its newest entry); and a bucket
// whose quota is stated as its rate, twice its burst (this project's
// server's policies: q=10;w=1 for 10 a second, burst 5), never has more
// than half of it, but never said it would be whole a window on. The
// window is the one the server says, else span's guess; 0 if neither, or
// if s shows no such thing.
func (q *quota) stillCounted(s *headers.Quota, sent time.Time) time.Duration {
	if !q.fine || q.heard < 2 || q.guessed || q.restarts || q.refill || q.rmin > 0 || s.Limit <= 1 || s.Limit >= sendLogSize ||
		s.Remaining < 0 || 2*s.Remaining >= s.Limit || sent.Before(q.reset) || s.Reset.Sub(q.said.time()).Abs() <= sameEnd {
		return 0
	}
	w := q.stillWindow(s)
	if r := q.reached(); r > w+w/4 || r < w-w/4 {
		// Whole again further ahead than a log would be (a sliding
		// counter), or never said to be a window away (a bucket that
		// says when one more is free, under a quota stated as its rate).
		return 0
	}
	return w
}

// lingers reports whether an answer s to the probe of q's end, told in
// whole seconds, shows q to count like a log: the probe went alone once
// the window the server said was spent had ended, and it was let through
// with most of the limit still counted. A fixed window that had not turned
// would have refused it; one that had would count the probe alone. What
// the server still counts are requests from before the end: a log (or a
// sliding counter) lets them go one at a time, a window after each came.
// @nestjs/throttler's count is such a log, each hit leaving ttl after it
// came, but its X-RateLimit-Reset tells of a window that starts at the
// first request after the last one ended: read as that window's end, each
// probe found the log still full and the whole window was waited out
// again, 1.68-1.72x the ideal over windows of 2-5 s. Its reset is
// written relative to the answer, as NestJS's: one in epoch seconds may be
// a sliding counter's fixed window (go-chi/httprate's), whose count, still
// weighed by the window before, falls through the window, and a log's
// timing drew refusals from it (TestWindowsAtEveryPhase: 5 where 3 are
// held); a log counted in epoch seconds is found as its count falls
// (fell).
func (q *quota) lingers(s *headers.Quota, probe bool) bool {
	return probe && !q.fine && q.heard >= 2 && !q.refill && !q.restarts && q.rmin == 0 && s.Reset.Nanosecond() != 0 &&
		s.Limit > 1 && s.Limit < sendLogSize && s.Remaining >= 0 && s.Remaining < s.Limit-1-s.Limit/10
}

// reachTo notes how far ahead of now, an answer's time, s's reset lies,
// while q, told finer than the second, is not found to slide: a log is
// whole again a window after its newest entry, a sliding counter up to
// two (stillCounted).
func (q *quota) reachTo(s *headers.Quota, now time.Time) {
	if !q.fine || q.sliding() || s.Reset.IsZero() {
		return
	}
	if d := float32(s.Reset.Sub(now).Seconds()); d > q.slack {
		q.slack = d
	}
}

// reached is the furthest ahead a reset of q was (reachTo), or 0 once q
// is found to slide.
func (q *quota) reached() time.Duration {
	if q.sliding() {
		return 0
	}
	return time.Duration(float64(q.slack) * float64(time.Second))
}

// stillWindow is the window of q, found to count like a log
// (stillCounted): the one the server says, else span's guess; 0 if
// neither.
func (q *quota) stillWindow(s *headers.Quota) time.Duration {
	if s.Window > 0 {
		return s.Window
	}
	return q.span.guess(!q.fine)
}

// rated reports whether an answer s to a request sent at sent, read at
// now, whose quota states window (its own, or its twin's in the same
// answer: statedWindow), shows q to be a bucket that refills at the rate
// its quota states — limit per window, a unit each window/limit —
// rather than a window of that length: no answer of q said its reset lay
// more than a unit and a half ahead (reached; a window's end lies up to
// a window ahead, a log's or a sliding counter's "whole again" a window
// or two), the last one's has passed, and this one says another, a unit
// ahead at most, with less than the limit remaining (a fixed window
// whose first answers came in its last unit all say the same end); and
// it took longer than a unit to come back. (Nearer, read as a window
// whose end is a unit away and probed at each end, it lost less than the
// bucket model did: 1.00x against 1.01-1.03x at 20 ms.) This project's
// server, under a policy, states a token bucket of 10 a second, burst 5,
// as q=10;w=1 and says when one more is free: read as a window of a
// second whose end is a tenth away, each end was probed alone, 1.60x at
// 200 ms each way.
func (q *quota) rated(s *headers.Quota, window time.Duration, sent, now time.Time) bool {
	if !q.fine || q.refill || window <= 0 || s.Limit <= 1 || s.Remaining < 0 || s.Remaining >= s.Limit || q.heard < 3 || q.restarts || q.log ||
		q.said == 0 || now.Before(q.reset) || s.Reset.Sub(q.said.time()).Abs() <= sameEnd {
		return false
	}
	unit := window / time.Duration(s.Limit)
	d := s.Reset.Sub(now)
	return d > 0 && d <= unit+unit/10+resetSlack && q.reached() <= unit+unit/2 && now.Sub(sent) > unit
}

// rates takes q for a bucket that refills at the rate its quota states
// (rated): a unit each window/limit, holding what s says remains and one
// (held, in bucketUsed: apply).
func (q *quota) rates(s *headers.Quota, window time.Duration) {
	q.refill, q.reach, q.bucketUsed = true, window/time.Duration(s.Limit), uint16(min(s.Remaining+1, math.MaxUint16))
}

// spent counts n units that a request sent at sent took of q, a bucket
// found by its answers, when its answer was not learned from (an older
// word than the level q holds): sent after the request whose answer q's
// level is (span.openAt, for such a bucket), it reached the server after
// that level was read, and the units it took are in no answer learned,
// and no longer claimed. (Read as of each answer's arrival, the refill
// of the way back made up for them; read as of the server's decision,
// they put a request too many into the bucket now and then.)
func (q *quota) spent(n int64, sent time.Time) {
	if !q.refill || q.reach <= 0 || n <= 0 || !sent.After(q.span.openAt) {
		return
	}
	q.rmin -= n
	q.full = q.at.Add(time.Duration(q.limit-q.rmin) * q.reach)
}

// backMax bounds the way back a bucket's level is read across: a long
// round trip is mostly the call itself, and a server may read its bucket
// as it answers.
const backMax = 250 * time.Millisecond
