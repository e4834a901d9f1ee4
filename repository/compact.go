package repository

import "github.com/throttlekit/throttle/limiters"

// A Memory keeps a key whose limiter is a GCRA or a TokenBucket with
// nobody waiting as its state alone: one timestamp in the entry (tat),
// beside a pointer to its configuration, which the keys of one
// configuration share (limiters.GCRAStateOf). It decides such a key's
// calls itself, with the configuration's arithmetic under the shard's
// lock, and makes the limiter again (GCRAParams.NewLimiter) only for what
// needs one: an Acquire that must wait, Get, Reconfigure. The key keeps
// that limiter from then on. The decisions are the limiter's, exactly:
// only rates whose interval is a whole number of nanoseconds, whose state
// fits in an int64 without rounding (GCRAParams.Whole), are kept so; the
// limiter's Stats counts start when it is made.

// holderFor returns what a new entry for lim, a limiter the factory just
// made, points to, and sets *tat: the shared configuration and lim's state
// when lim can be kept as a state; else a holder of lim.
func (m *Memory) holderFor(lim limiters.Limiter, tat *int64) *holder {
	kind := m.kind.Load()
	var like *limiters.GCRAParams
	if kind != nil {
		like = kind.p
	}
	p, st, ok := limiters.GCRAStateOf(lim, like)
	if !ok || !p.Whole() {
		return &holder{lim: lim}
	}
	if p != like {
		kind = &holder{p: p}
		m.kind.Store(kind)
	}
	*tat = p.Pack(st)
	return kind
}

// try decides n permits of e's limiter now, as its TryAcquire does (n == 0
// peeks). s.mu must be held.
func (m *Memory) try(e *entry, n int) limiters.Decision {
	x := e.x.Load()
	if x.lim != nil {
		return x.lim.TryAcquire(n)
	}
	st := x.p.Unpack(e.tat)
	d := x.p.TryAcquire(&st, n)
	e.tat = x.p.Pack(st)
	return d
}

// acquireNow grants an Acquire of n permits of compact e at once, as its
// limiter would with nobody waiting, and returns nil and the result; if it
// must wait, it returns e's limiter, made, for the caller to wait on with
// no lock held. s.mu must be held; ctx has been checked.
func (m *Memory) acquireNow(e *entry, n int) (limiters.Limiter, error) {
	if x := e.x.Load(); x.lim == nil {
		switch st := x.p.Unpack(e.tat); {
		case n == 0:
			return nil, nil
		case n > x.p.Limit():
			return nil, limiters.ErrExceedsLimit
		case x.p.TryAcquire(&st, n).Allowed:
			e.tat = x.p.Pack(st)
			return nil, nil
		}
	}
	return m.limiter(e), nil
}

// limiter returns e's limiter, making it from a compact entry's state; the
// entry keeps it. s.mu must be held.
func (m *Memory) limiter(e *entry) limiters.Limiter {
	x := e.x.Load()
	if x.lim == nil {
		x = &holder{lim: x.p.NewLimiter(x.p.Unpack(e.tat))}
		e.x.Store(x)
		e.tat = 0
	}
	return x.lim
}

// closeEntry closes e's limiter, as the entry is forgotten. A compact
// entry has none to close, unless a call holds it pinned: that call then
// finds a closed limiter in its state, as it would have. s.mu must be
// held.
func (m *Memory) closeEntry(e *entry) error {
	if x := e.x.Load(); x.lim == nil && e.refs.Load() == 0 {
		return nil
	}
	return m.limiter(e).Close()
}

// recompact keeps e, made from a compact entry for Reconfigure, as a state
// again, when nothing holds it pinned (a pinned call may be using the
// limiter). s.mu must be held.
func (m *Memory) recompact(e *entry) {
	if e.refs.Load() > 0 {
		return
	}
	lim := e.x.Load().lim
	var tat int64
	if x := m.holderFor(lim, &tat); x.lim == nil {
		e.tat = tat
		e.x.Store(x)
	}
}

// Members appends to into the state of each limit of key's limiter, as
// limiters.Members reports it for a request of n permits, creating the
// key's limiter if need be, as Get does; it fails as Get returns nil. Unlike
// Get it leaves a key kept as a state (see NewMemory) as it is: servers
// call it for every answer whose limits they advertise one by one.
func (m *Memory) Members(key string, n int, into []limiters.Member) ([]limiters.Member, error) {
	e, s, err := m.pin(key)
	if err != nil {
		return into, err
	}
	defer e.refs.Add(-1)
	s.mu.Lock()
	x := e.x.Load()
	if x.lim == nil {
		into = append(into, x.p.Member(x.p.Unpack(e.tat), n))
		s.mu.Unlock()
		return into, nil
	}
	s.mu.Unlock()
	return limiters.Members(x.lim, n, into), nil
}
