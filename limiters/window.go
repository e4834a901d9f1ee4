package limiters

import (
	"time"
)

func mustWindow(w time.Duration, ctor string) {
	if w <= 0 {
		panic("limiters: " + ctor + ": window must be positive, got " + w.String())
	}
}

// windowLimiter is what FixedWindow, SlidingWindow and SlidingLog share:
// the core and the setters of their window.
type windowLimiter struct {
	core
	w *window // the algorithm's window, inside its state
}

func (wl *windowLimiter) init(a algo, w *window, limit int, window time.Duration, ctor string, opts []Option) {
	mustPositive(limit, ctor, "limit")
	mustWindow(window, ctor)
	w.lim, w.win = limit, int64(window)
	wl.w = w
	wl.core.init(a, newConfig(-1, opts))
}

// FixedWindow admits limit permits per window. Windows are aligned to the
// Unix epoch (window k is [k·window, (k+1)·window)), so every process that
// uses the same window agrees on where each one starts.
type FixedWindow struct {
	windowLimiter
	s fixedWindow
}

// window is what the window algorithms share: the limit per window and
// the window's length (and, for the counters, the current window's start).
type window struct {
	lim   int
	win   int64
	start int64 // the current window's start, Unix nanoseconds
}

// setWindow changes the length to win, aligning start to now's window of
// the new length.
func (w *window) setWindow(now, win int64) {
	if win != w.win {
		w.win, w.start = win, floorDiv(now, win)*win
	}
}

type fixedWindow struct {
	window
	count int
	proj  *projection[fixedWindow] // nil until someone waits
}

// NewFixedWindow returns a limiter admitting limit permits per window. It
// panics if limit or window is not positive.
func NewFixedWindow(limit int, window time.Duration, opts ...Option) *FixedWindow {
	fw := &FixedWindow{}
	fw.init(&fw.s, &fw.s.window, limit, window, "NewFixedWindow", opts)
	return fw
}

func (f *fixedWindow) algorithm() string { return AlgFixedWindow }
func (f *fixedWindow) now() int64        { return wallNow() }
func (f *fixedWindow) limit() int        { return f.lim }

// left is the time from now to the end of the current window.
func (f *fixedWindow) left(now int64) int64 { return satAdd(f.start-now, f.win) }

// roll moves to now's window. It never moves back: a grant dated a little
// in the past (a late waker's due time) counts in the current window.
func (f *fixedWindow) roll(now int64) {
	if w := floorDiv(now, f.win) * f.win; w > f.start {
		f.start, f.count = w, 0
	}
}

func (f *fixedWindow) wait(now int64, n int) int64 {
	f.roll(now)
	if n <= f.lim-f.count {
		return 0
	}
	return f.left(now)
}

func (f *fixedWindow) take(now int64, n int) {
	f.roll(now)
	f.count += n
}

func (f *fixedWindow) refund(now int64, n int) {
	f.roll(now)
	f.count = max(f.count-n, 0)
}

func (f *fixedWindow) state(now int64, _ int) (int, int, int64) {
	f.roll(now)
	return f.lim, max(f.lim-f.count, 0), f.left(now)
}

func (f *fixedWindow) project(now int64, ahead waiters, n int) int64 {
	return projectCached(&f.proj, *f, cloneValue, now, ahead, n)
}

// cloneValue copies a state that holds no reference to what it changes.
func cloneValue[S any](s S) S { return s }

// SlidingWindow approximates a sliding window with two fixed windows (aligned
// to the Unix epoch like FixedWindow's): at elapsed time e into the current
// window it admits n iff
//
//	prev·(1 − e/window) + curr + n ≤ limit
//
// where prev and curr count the permits granted in the previous and current
// windows. It costs two counters per key whatever the limit.
//
// The approximation assumes the previous window's grants were spread evenly.
// Over time it admits within about 1% as many permits as the exact
// SlidingLog, but a single span of one window length can hold more than
// limit: about 10% more on steady traffic, 30% on random (Poisson) traffic,
// and in the worst case (every grant of the previous window packed at its
// very end) up to 2·limit−1 grants. Use SlidingLog when every span must be
// exact.
type SlidingWindow struct {
	windowLimiter
	s slidingWindow
}

type slidingWindow struct {
	window
	prev, curr int
	proj       *projection[slidingWindow] // nil until someone waits
}

// NewSlidingWindow returns a sliding-window-counter limiter admitting about
// limit permits per window. It panics if limit or window is not positive.
func NewSlidingWindow(limit int, window time.Duration, opts ...Option) *SlidingWindow {
	sw := &SlidingWindow{}
	sw.init(&sw.s, &sw.s.window, limit, window, "NewSlidingWindow", opts)
	return sw
}

func (s *slidingWindow) algorithm() string { return AlgSlidingWindow }
func (s *slidingWindow) now() int64        { return wallNow() }
func (s *slidingWindow) limit() int        { return s.lim }

func (s *slidingWindow) roll(now int64) {
	w := floorDiv(now, s.win) * s.win
	switch {
	case w <= s.start: // never back: see fixedWindow.roll
	case w == s.start+s.win:
		s.start, s.prev, s.curr = w, s.curr, 0
	default:
		s.start, s.prev, s.curr = w, 0, 0
	}
}

// fits reports whether prev·(win−e) + (curr+n)·win ≤ lim·win.
func (s *slidingWindow) fits(e int64, prev, curr, n int) bool {
	if n > s.lim-curr {
		return false
	}
	return mulLE(int64(prev), s.win-e, int64(s.lim-curr-n), s.win)
}

// due is the elapsed time into a window with counts prev and curr from which
// n more permits fit, or -1 if they never fit in that window.
func (s *slidingWindow) due(prev, curr, n int) int64 {
	if n > s.lim-curr {
		return -1
	}
	room := s.lim - curr - n
	if prev == 0 {
		return 0
	}
	// prev·(win−e) ≤ room·win  ⇔  e ≥ win − ⌊room·win/prev⌋
	return max(s.win-mulDiv(int64(room), s.win, int64(prev)), 0)
}

func (s *slidingWindow) wait(now int64, n int) int64 {
	s.roll(now)
	e := now - s.start
	if s.fits(e, s.prev, s.curr, n) {
		return 0
	}
	if d := s.due(s.prev, s.curr, n); d >= 0 && d < s.win {
		return s.start + d - now
	}
	// Not in this window: in the next, the current count becomes prev.
	return satAdd(satAdd(s.start-now, s.win), s.due(s.curr, 0, n))
}

func (s *slidingWindow) take(now int64, n int) {
	s.roll(now)
	s.curr += n
}

func (s *slidingWindow) refund(now int64, n int) {
	s.roll(now)
	s.curr = max(s.curr-n, 0)
}

func (s *slidingWindow) state(now int64, _ int) (int, int, int64) {
	s.roll(now)
	e := now - s.start
	// The previous window's weight, rounded up so Remaining never promises
	// a permit that would be refused.
	w := mulDiv(int64(s.prev), s.win-e, s.win)
	if !mulLE(int64(s.prev), s.win-e, w, s.win) {
		w++
	}
	rem := max(s.lim-s.curr-int(w), 0)
	var reset int64
	switch {
	case s.curr > 0:
		reset = satAdd(satAdd(s.start-now, s.win), s.win)
	case s.prev > 0:
		reset = satAdd(s.start-now, s.win)
	}
	return s.lim, rem, reset
}

func (s *slidingWindow) project(now int64, ahead waiters, n int) int64 {
	return projectCached(&s.proj, *s, cloneValue, now, ahead, n)
}

// SlidingLog is the exact sliding window: it admits n iff the permits granted
// in (now−window, now] plus n are at most limit. It keeps a log of its
// grants in a ring buffer whose size is bounded by limit.
type SlidingLog struct {
	windowLimiter
	s slidingLog
}

type logEntry struct {
	at int64 // Unix nanoseconds
	n  int
}

type slidingLog struct {
	window                         // start unused: the log needs no alignment
	ring   []logEntry              // len(ring) is the capacity in use, ≤ lim
	head   int                     // index of the oldest entry
	count  int                     // entries in use
	total  int                     // permits in the log
	proj   *projection[slidingLog] // nil until someone waits
}

// NewSlidingLog returns an exact sliding-window limiter admitting limit
// permits per window. It panics if limit or window is not positive.
func NewSlidingLog(limit int, window time.Duration, opts ...Option) *SlidingLog {
	sl := &SlidingLog{}
	sl.init(&sl.s, &sl.s.window, limit, window, "NewSlidingLog", opts)
	return sl
}

func (l *slidingLog) algorithm() string { return AlgSlidingLog }
func (l *slidingLog) now() int64        { return wallNow() }
func (l *slidingLog) limit() int        { return l.lim }

func (l *slidingLog) at(i int) *logEntry { return &l.ring[(l.head+i)%len(l.ring)] }

// expire drops the entries at or before now−window.
func (l *slidingLog) expire(now int64) {
	for l.count > 0 {
		e := &l.ring[l.head]
		if e.at > now-l.win {
			return
		}
		l.total -= e.n
		l.head = (l.head + 1) % len(l.ring)
		l.count--
	}
}

func (l *slidingLog) wait(now int64, n int) int64 {
	l.expire(now)
	over := n - (l.lim - l.total)
	if over <= 0 {
		return 0
	}
	// Wait until the oldest entries holding `over` permits have expired.
	for i := 0; i < l.count; i++ {
		e := l.at(i)
		over -= e.n
		if over <= 0 {
			return satAdd(e.at-now, l.win)
		}
	}
	return never // unreachable while n ≤ lim
}

func (l *slidingLog) take(now int64, n int) {
	l.expire(now)
	if l.count > 0 {
		last := l.at(l.count - 1)
		now = max(now, last.at) // the log stays in order, even for a grant dated in the past
		if last.at == now {
			last.n += n
			l.total += n
			return
		}
	}
	if l.count == len(l.ring) {
		l.grow()
	}
	*l.at(l.count) = logEntry{at: now, n: n}
	l.count++
	l.total += n
}

// grow doubles the ring, up to lim entries (each entry holds ≥ 1 permit and
// the log holds ≤ lim permits, so lim entries always suffice; after the
// limit was lowered the log may hold more, and the ring grows past it).
func (l *slidingLog) grow() {
	size := max(min(max(2*len(l.ring), 4), l.lim), l.count+1)
	ring := make([]logEntry, size)
	for i := 0; i < l.count; i++ {
		ring[i] = *l.at(i)
	}
	l.ring, l.head = ring, 0
}

func (l *slidingLog) refund(now int64, n int) {
	for n > 0 && l.count > 0 {
		last := l.at(l.count - 1)
		k := min(n, last.n)
		last.n -= k
		l.total -= k
		n -= k
		if last.n == 0 {
			l.count--
		}
	}
}

func (l *slidingLog) state(now int64, _ int) (int, int, int64) {
	l.expire(now)
	if l.count == 0 {
		return l.lim, l.lim, 0
	}
	return l.lim, max(l.lim-l.total, 0), satAdd(l.at(l.count-1).at-now, l.win)
}

func (l *slidingLog) project(now int64, ahead waiters, n int) int64 {
	if ahead.first == nil {
		return l.wait(now, n)
	}
	return projectCached(&l.proj, *l, cloneLog, now, ahead, n)
}

// cloneLog copies a log with a ring of its own.
func cloneLog(l slidingLog) slidingLog {
	l.ring = append([]logEntry(nil), l.ring...)
	return l
}
