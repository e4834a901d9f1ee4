package throttle

import (
	"math"
	"time"
)

// A sliding log counts exactly the requests it admitted within the last
// window. An answer that says c of a client's requests are in it — its
// limit less what remains — puts the window's length between how long
// before the answered request the c-th admitted request went (that one
// was still in the window; the answered one is the first) and how long
// before it the (c+1)-th went (that one had left it), give or take the
// jitter of the way there. Every such answer bounds the window, and the
// bounds tighten as answers come: counted keeps them. An answer whose
// count reaches back past a request not answered yet bounds nothing: that
// one may yet be refused, and so not be in the log (taken as in, it put a
// real log of 5 per 2 s at one second, and drew 28 refusals of 250).
//
// It matters where a server's reset overstates the window: Flask-Limiter's
// moving window writes when the log will be empty — its newest entry's
// second, plus the window, plus one — and read as the furthest a window
// reaches (quota.reach) that made a log of 10 a second one of 10 per two
// seconds: twice the time its limit allows.

// sendLogSize is how many sends the log keeps: the bounds need the c+1
// sends before an answered one, so a window's limit up to a little less.
// (At 128, logs of 128-255 were read from their resets and paced:
// Flask-Limiter's moving window of 250 per 5 s, 50 goroutines 200 ms
// away, drew 27 refusals and 1.59x; timed, 0 and 1.25x. A log is 3,056
// bytes, unsafe.Sizeof — 2,896 with the bounds of one quota, 160 more
// with each quota's — in the partitions that find one.)
const sendLogSize = 256

// sendLog is a partition's last sends, by sequence number (ticket.seq),
// what became of them, and the bounds on each quota's window its answers
// gave (a server may keep several logs of a client's requests:
// @nestjs/throttler's documentation sets up three, of 1, 10 and 60 s).
type sendLog struct {
	base   time.Time          // at is counted from base
	at     [sendLogSize]int64 // nanoseconds after base
	state  [sendLogSize]sendState
	next   uint32               // the sequence number of the last send (from 1)
	bounds [maxQuotas]logBounds // by the quota's index
	// wave is how many sends the log began with: the first wave's, all
	// sent when it was (sequence numbers 1 to wave), whose tickets carry
	// none; their answers take them in turn from waveNext (firstWave).
	wave, waveNext uint32
	// trip is each admitted send's round trip, in tripUnits, and quick
	// the quickest after the first wave: a log counts each entry from
	// when the server took it, and a send that came back late may have
	// been taken that much later than it went (lateBy, lateness).
	trip  [sendLogSize]uint16
	quick time.Duration
}

// logBounds are the bounds the answers of one quota put on its window,
// if it is a log of our requests (count), and whether the send log still
// times it.
type logBounds struct {
	lo  time.Duration // the window is longer than lo
	hi  time.Duration // and at most hi (0: unknown)
	off bool          // a request it timed was refused: the quota is paced (gate.logTimes)
}

// tripUnit is the unit of sendLog.trip: up to 6.5 s.
const tripUnit = 100 * time.Microsecond

// startWave begins the log, at its first answer, with the n sends of the
// first wave, all at at: a log found in the first window then holds it
// (@nestjs/throttler's of 10 per 5 s, 10 goroutines: the first wave was
// all of its first window, and the log, begun at the window's last
// answer, timed nothing until a window of ours had gone since).
func (l *sendLog) startWave(n int, at time.Time) {
	for range min(n, sendLogSize) {
		l.add(at)
	}
	l.wave, l.waveNext = l.next, 1
}

// firstWave returns the sequence number an answer to a request of the
// first wave takes (its ticket carries none): the next of the sends the
// log began with not answered yet, or 0. They all went at once, so which
// answers which is of no matter: each is as late as its answer (lateBy).
func (l *sendLog) firstWave() uint32 {
	if l.waveNext == 0 || l.waveNext > l.wave || !l.has(l.waveNext) {
		return 0
	}
	seq := l.waveNext
	l.waveNext++
	return seq
}

// lateBy notes when the admitted send seq came back (now): its round
// trip, which it returns (0 if not noted), and the quickest so far
// (trip, quick; lateness reads them). A server counts an entry of its
// log from when it took the request, at the latest a way back before
// its answer; a request sent now reaches it a way there after, at the
// soonest: the entry leaves the log, for such a request, a window after
// it was sent and its lateness (freeAt). A server that takes its
// requests in turn, or is slowed for a moment, takes some well after
// they went: three @nestjs/throttler servers in one Node.js process, a
// client each, answered a request 31 ms after it went, on a round trip
// of 1 ms, and the one sent a window after it was refused, and blocked
// for a window; a first wave of ten, taken over 21 ms, drew five
// refusals a window on. (Moving the send's time instead bent the window
// its counts bound: count reads the times.)
func (l *sendLog) lateBy(seq uint32, now time.Time) (rtt time.Duration) {
	if !l.has(seq) || l.state[seq%sendLogSize] != sendAdmitted {
		return 0
	}
	rtt = now.Sub(l.base) - time.Duration(l.at[seq%sendLogSize])
	if rtt < 0 {
		return 0
	}
	if seq > l.wave && (l.quick == 0 || rtt < l.quick) {
		l.quick = rtt
	}
	l.trip[seq%sendLogSize] = uint16(min(rtt/tripUnit, math.MaxUint16))
	return rtt
}

// lateness is how much later than it went the admitted send seq may have
// been counted: its round trip less the quickest seen so far, read now
// (the quickest only falls: a round trip read against the first few, all
// slow on a loaded server, was taken for the ways there and back, and
// ten went at once into a log that still held them, and were refused).
// Under spanWaysMin the quickest round trip is mostly the server's own
// time (a loopback, a busy event loop), not the ways there and back, and
// some of it may come before an entry is counted; and a first wave went
// at once, taken in turn: for those, the whole round trip.
func (l *sendLog) lateness(seq uint32) time.Duration {
	rtt := l.tripOf(seq)
	if l.quick < spanWaysMin || seq <= l.wave {
		return rtt
	}
	return max(rtt-l.quick, 0)
}

// tripOf is the round trip lateBy noted for the send seq (0 if none).
func (l *sendLog) tripOf(seq uint32) time.Duration {
	return time.Duration(l.trip[seq%sendLogSize]) * tripUnit
}

// sendState is what became of a send: not answered yet, admitted (in the
// log), or refused (not in it).
type sendState uint8

const (
	sendPending sendState = iota
	sendAdmitted
	sendRefused
)

// add records a send at now and returns its sequence number.
func (l *sendLog) add(now time.Time) uint32 {
	l.next++
	l.at[l.next%sendLogSize] = int64(now.Sub(l.base))
	l.state[l.next%sendLogSize] = sendPending
	l.trip[l.next%sendLogSize] = 0
	return l.next
}

// refused takes the request seq out of the log: a log keeps what it
// admitted.
func (l *sendLog) refused(seq uint32) {
	if l.has(seq) {
		l.state[seq%sendLogSize] = sendRefused
	}
}

// admitted marks the request seq as in the log.
func (l *sendLog) admitted(seq uint32) {
	if l.has(seq) {
		l.state[seq%sendLogSize] = sendAdmitted
	}
}

// has reports whether seq is still in the log.
func (l *sendLog) has(seq uint32) bool {
	return seq != 0 && seq <= l.next && l.next-seq < sendLogSize
}

// count applies an answer to the request seq, come back at now, saying
// that c of the client's requests were in a quota's window, the request
// included, to its bounds b: the window is longer than the span from
// when the c-th admitted send came back to when seq went, and at most
// the span from when the (c+1)-th went to now (a server takes a request
// between its sending and its answer), each at least as wide as the span
// between the sends widened by jitter. Bounds that cross the ones before
// (the server is no exact log, or its window changed) start over from
// this answer's.
func (l *sendLog) count(b *logBounds, seq uint32, c int64, jitter time.Duration, now time.Time) {
	if !l.has(seq) {
		return
	}
	l.admitted(seq)
	if c < 1 {
		return
	}
	at := l.at[seq%sendLogSize]
	var lo, hi time.Duration
	// Requests sent within the jitter before this one (or with it) may
	// have reached the server after it, and not be counted: the c-th
	// counted may lie that many further back, and the first one past the
	// window too (beside). Those sent within the jitter after it may
	// have reached it first, and be among the c: the c-th may lie that
	// many nearer (ahead). (Two sent in the same instant, the later in
	// our log counted first, put a log of 5 per 2 s at one second.)
	var ahead int64
	for s := seq + 1; l.has(s); s++ {
		if time.Duration(l.at[s%sendLogSize]-at) > jitter {
			break
		}
		if l.state[s%sendLogSize] != sendRefused {
			ahead++
		}
	}
	if c -= ahead; c < 1 {
		return // every one counted may have been sent with it
	}
	found, beside := int64(0), int64(0)
	for s := seq; l.has(s); s-- {
		switch l.state[s%sendLogSize] {
		case sendRefused:
			continue
		case sendPending:
			return
		}
		t := l.at[s%sendLogSize]
		if s != seq && time.Duration(at-t) <= jitter {
			beside++
		}
		found++
		if found == c {
			// Still counted when this request reached the server
			// (after it went), though taken no later than its answer
			// came back.
			lo = time.Duration(at-t) - max(l.tripOf(s), jitter)
		}
		if found == c+1+ahead+beside {
			// Gone when this request was taken (before its answer
			// came back), though taken no sooner than it went.
			hi = max(now.Sub(l.base)-time.Duration(t), time.Duration(at-t)+jitter)
			break
		}
	}
	if found < c {
		return // the log does not reach back that far
	}
	if hi != 0 && b.hi != 0 && (lo >= b.hi || hi <= b.lo) {
		b.lo, b.hi = lo, hi
		return
	}
	b.lo = max(b.lo, lo)
	if hi != 0 && (b.hi == 0 || hi < b.hi) {
		b.hi = hi
	}
}

// window is the window's length the bounds allow, when they allow a
// single whole number of seconds (windows are configured in seconds), or 0.
func (b *logBounds) window() time.Duration {
	if b.hi == 0 {
		return 0
	}
	w := (max(b.lo, 0)/time.Second + 1) * time.Second
	if w > b.hi || w+time.Second <= b.hi {
		return 0
	}
	return w
}

// freeAt is when a request sent would find fewer than limit of the
// partition's requests in a log of the window span: span after the
// limit-th newest send that is in it or may be (refused ones are not),
// or after an older one that came back later than that (lateBy), or
// zero if fewer than limit are in the log. A send not answered yet is
// taken as late as pending. (The limit-th latest to leave lies no later
// than the latest of the limit-th newest and those before it.)
func (l *sendLog) freeAt(limit int64, span, pending time.Duration) time.Time {
	if limit <= 0 || limit >= sendLogSize {
		return time.Time{}
	}
	found, last := int64(0), int64(math.MinInt64)
	for s := l.next; l.has(s); s-- {
		var at int64
		switch l.state[s%sendLogSize] {
		case sendRefused:
			continue
		case sendPending:
			at = l.at[s%sendLogSize] + int64(pending)
		default:
			at = l.at[s%sendLogSize] + int64(l.lateness(s))
		}
		if found < limit {
			found++
		}
		if found == limit {
			last = max(last, at)
		}
	}
	if found < limit {
		return time.Time{}
	}
	return l.base.Add(time.Duration(last) + span)
}
