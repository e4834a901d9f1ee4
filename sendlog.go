package throttle

import "time"

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
// away, drew 27 refusals and 1.59x; timed, 0 and 1.25x. A log is 2,368
// bytes, unsafe.Sizeof, in the partitions that find one.)
const sendLogSize = 256

// sendLog is a partition's last sends, by sequence number (ticket.seq),
// what became of them, and the bounds on one sliding quota's window its
// answers gave.
type sendLog struct {
	base  time.Time          // at is counted from base
	at    [sendLogSize]int64 // nanoseconds after base
	state [sendLogSize]sendState
	next  uint32        // the sequence number of the last send (from 1)
	quota int           // the index of the quota the bounds are of
	lo    time.Duration // the window is longer than lo
	hi    time.Duration // and at most hi (0: unknown)
	off   bool          // a request it timed was refused: the quota is paced (gate.logTimes)
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

// count applies an answer to the request seq saying that c of the
// client's requests were in the window, the request included: the window
// is longer than the span back to the c-th admitted send and at most the
// span back to the (c+1)-th, each widened by jitter. Bounds that cross
// the ones before (the server is no exact log, or its window changed)
// start over from this answer's.
func (l *sendLog) count(seq uint32, c int64, jitter time.Duration) {
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
			lo = time.Duration(at-t) - jitter
		}
		if found == c+1+ahead+beside {
			hi = time.Duration(at-t) + jitter
			break
		}
	}
	if found < c {
		return // the log does not reach back that far
	}
	if hi != 0 && l.hi != 0 && (lo >= l.hi || hi <= l.lo) {
		l.lo, l.hi = lo, hi
		return
	}
	l.lo = max(l.lo, lo)
	if hi != 0 && (l.hi == 0 || hi < l.hi) {
		l.hi = hi
	}
}

// window is the window's length the bounds allow, when they allow a
// single whole number of seconds (windows are configured in seconds), or 0.
func (l *sendLog) window() time.Duration {
	if l.hi == 0 {
		return 0
	}
	w := (max(l.lo, 0)/time.Second + 1) * time.Second
	if w > l.hi || w+time.Second <= l.hi {
		return 0
	}
	return w
}

// freeAt is when a request sent would find fewer than limit of the
// partition's requests in a log of the window span: span after the
// limit-th newest send that is in it or may be (refused ones are not),
// or zero if fewer than limit are in the log.
func (l *sendLog) freeAt(limit int64, span time.Duration) time.Time {
	if limit <= 0 || limit >= sendLogSize {
		return time.Time{}
	}
	found := int64(0)
	for s := l.next; l.has(s); s-- {
		if l.state[s%sendLogSize] == sendRefused {
			continue
		}
		if found++; found == limit {
			return l.base.Add(time.Duration(l.at[s%sendLogSize]) + span)
		}
	}
	return time.Time{}
}
