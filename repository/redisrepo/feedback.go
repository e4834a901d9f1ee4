package redisrepo

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/feedbackstore"
)

// FeedbackStore is a throttle.FeedbackStore on Redis: the Transports of a
// fleet of processes, each with its own client of the same Redis, share
// the pauses they learn, elect one prober after each pause, and spend a
// window quota the server reports once for the whole fleet.
//
// Pauses and resumptions travel on one Pub/Sub channel (prefix +
// "feedback"); the probe election is a lease key per partition (SET NX
// PX); a shared quota is a hash per partition, claimed and settled by one
// script each, one round trip per call, with time from Redis TIME. Every
// key has a TTL. Only partitions whose servers said something are ever
// written. The pauses in force are also kept in a sorted set (prefix +
// "pauses", the partition scored by the pause's end in ms), so that a
// Transport that joins during a pause (a new replica of the fleet) hears
// of it when it subscribes, before its first request.
//
// Every call ends within the store's timeout (WithTimeout, 1s by default)
// or its context's deadline, whatever the client's settings (see New); a
// late answer is an error wrapping ErrUnavailable.
//
// Close stops the subscription. A FeedbackStore is safe for concurrent use.
type FeedbackStore struct {
	client  redis.UniversalClient // deadlineClient(the caller's)
	own     bool                  // client is ours, closed with the store
	dials   *dialWatch            // its failed dials, when it is ours
	prefix  string
	channel string
	pauses  string
	timeout time.Duration
	id      string // names this store (its process) in the claims' queue

	mu     sync.Mutex
	subs   map[int]func(feedbackstore.Notice)
	next   int
	ps     *redis.PubSub
	wg     sync.WaitGroup
	closed bool
}

var _ throttle.FeedbackStore = (*FeedbackStore)(nil)

// NewFeedbackStore returns a FeedbackStore on client. Of the options, only
// WithPrefix and WithTimeout apply. A nil client or option panics.
func NewFeedbackStore(client redis.UniversalClient, opts ...Option) *FeedbackStore {
	if client == nil {
		panic("redisrepo: NewFeedbackStore: nil client")
	}
	cfg := defaults()
	applyOptions(&cfg, opts)
	rc, dials, own, _ := deadlineClient(client)
	return &FeedbackStore{client: rc, own: own, dials: dials, prefix: cfg.prefix, channel: cfg.prefix + "feedback",
		pauses: cfg.prefix + "pauses", timeout: cfg.timeout, id: rand.Text()[:12], subs: make(map[int]func(feedbackstore.Notice))}
}

// bound is ctx bounded by the store's timeout.
func (s *FeedbackStore) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.timeout)
}

// unavailable marks a Redis failure as ErrUnavailable, saying what it was.
func (s *FeedbackStore) unavailable(err error) error {
	if err == nil {
		return nil
	}
	return unavailable(s.dials.cause(err, time.Now().Add(-s.timeout)), s.timeout)
}

// key names the Redis key of what kind says of partition, hash-tagged on
// the partition.
func (s *FeedbackStore) key(partition, kind string) string {
	return s.prefix + "{" + encodeKey(partition) + "}:" + kind
}

// feedbackTTL keeps a partition's shared state at most this long after
// its last write: throttle.DefaultMaxPause, the longest a pause lasts.
const feedbackTTL = int64(throttle.DefaultMaxPause / time.Millisecond)

// notify publishes ARGV[2] on ARGV[3]. A pause (ARGV[4], its end in ms,
// not 0) makes the probe lease KEYS[1] ARGV[1]'s until it ends; a
// resumption ends ARGV[1]'s lease.
var notify = redis.NewScript(`
local pause = tonumber(ARGV[4])
if pause == 0 then
	if redis.call("GET", KEYS[1]) == ARGV[1] then redis.call("DEL", KEYS[1]) end
else
	local t = redis.call("TIME")
	local ms = pause - (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
	if ms > 0 then redis.call("SET", KEYS[1], ARGV[1], "PX", ms) end
end
redis.call("PUBLISH", ARGV[3], ARGV[2])
return 1`)

// Pause implements throttle.FeedbackStore.
func (s *FeedbackStore) Pause(ctx context.Context, key, id string, until time.Time) error {
	return s.notify(ctx, key, id, until.UnixNano())
}

// Resume implements throttle.FeedbackStore.
func (s *FeedbackStore) Resume(ctx context.Context, key, id string) error {
	return s.notify(ctx, key, id, 0)
}

// notify records a pause (until, in ns, not 0) or a resumption in the set
// of pauses in force, then publishes it: a subscriber reads the set after
// its subscription is confirmed, so it misses neither.
func (s *FeedbackStore) notify(ctx context.Context, key, id string, until int64) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	msg := strconv.FormatInt(until, 10) + " " + key
	ms := (until + int64(time.Millisecond) - 1) / int64(time.Millisecond)
	if until != 0 {
		_, err := s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.ZRemRangeByScore(ctx, s.pauses, "-inf", "("+strconv.FormatInt(time.Now().UnixMilli(), 10))
			p.ZAdd(ctx, s.pauses, redis.Z{Score: float64(ms), Member: key})
			p.PExpire(ctx, s.pauses, time.Duration(feedbackTTL)*time.Millisecond)
			return nil
		})
		if err != nil {
			return s.unavailable(err)
		}
	} else if err := s.client.ZRem(ctx, s.pauses, key).Err(); err != nil {
		return s.unavailable(err)
	}
	return s.unavailable(notify.Run(ctx, s.client, []string{s.key(key, "probe")}, id, msg, s.channel, ms).Err())
}

// inForce returns the pauses in force now.
func (s *FeedbackStore) inForce(ctx context.Context) ([]feedbackstore.Notice, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	now := time.Now()
	zs, err := s.client.ZRangeByScoreWithScores(ctx, s.pauses, &redis.ZRangeBy{
		Min: "(" + strconv.FormatInt(now.UnixMilli(), 10), Max: "+inf"}).Result()
	if err != nil {
		return nil, s.unavailable(err)
	}
	ns := make([]feedbackstore.Notice, 0, len(zs))
	for _, z := range zs {
		key, ok := z.Member.(string)
		if ok && z.Score > 0 && z.Score < 1e15 {
			ns = append(ns, feedbackstore.Notice{Key: key, Until: time.UnixMilli(int64(z.Score))})
		}
	}
	return ns, nil
}

// probe takes the lease KEYS[1] for ARGV[1] for ARGV[2] ms unless another
// holds it; it answers 0, or the ms the other's lease has left. A store
// (ARGV[3]) whose Transport asks counts as asking (for ARGV[4] ms) for the
// shared quota KEYS[2] (see claim): one that lost the election waits for the probe's
// outcome, and must not lose its turn meanwhile.
var probe = redis.NewScript(`
local nk = "n:" .. ARGV[3]
local w = redis.call("HGET", KEYS[2], nk)
if w then
	local r, plus, c = string.match(w, "^(%d+)(%+?):(%d+):")
	if r then
		local t = redis.call("TIME")
		local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
		redis.call("HSET", KEYS[2], nk, r .. plus .. ":" .. c .. ":" .. (now + tonumber(ARGV[4])) .. ":w")
	end
end
local v = redis.call("GET", KEYS[1])
if v and v ~= ARGV[1] then return math.max(redis.call("PTTL", KEYS[1]), 1) end
redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
-- the winner's next claim is its probe's: past a reset, it is not held
w = redis.call("HGET", KEYS[2], nk)
if w then
	local r, plus, c, till = string.match(w, "^(%d+)(%+?):(%d+):(%d+)")
	if r then redis.call("HSET", KEYS[2], nk, r .. plus .. ":" .. c .. ":" .. till .. ":p") end
end
return 0`)

// Probe implements throttle.FeedbackStore.
func (s *FeedbackStore) Probe(ctx context.Context, key, id string, lease time.Duration) (time.Time, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	ms, err := probe.Run(ctx, s.client, []string{s.key(key, "probe"), s.key(key, "quota")}, id, max(lease.Milliseconds(), 1), s.id, asking.Milliseconds()).Int64()
	if err != nil || ms == 0 {
		return time.Time{}, s.unavailable(err)
	}
	return time.Now().Add(time.Duration(ms) * time.Millisecond), nil
}

// A shared quota is the hash KEYS[1]: k (1: known), rem (the least the
// window's answers said remains), reset (ms), seq (claims so far), x (1: a
// claim's answer was heard in the window); and the sorted set KEYS[2] of
// the claims on the wire, each scored by when it was made. Times are Redis
// TIME's. The rules are throttle's MemoryFeedbackStore's, with one more: a
// claim whose answer never came (its Claim's reply was lost, or its Settle
// failed, while Redis was unwell) must not hold the fleet back for good.
// So a claim counts as on the wire for at most wireFor, and it holds back
// the claims that wait for a claimed answer (the quota known only from
// unclaimed answers) for at most blindFor.
const quotaNow = `
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local q = redis.call("HMGET", KEYS[1], "k", "rem", "reset", "x")
local known, exact = q[1] == "1", q[4] == "1"
local rem, reset = tonumber(q[2]) or 0, tonumber(q[3]) or 0
`

// wireFor is the longest a claim counts as on the wire without its answer;
// blindFor the longest it holds back claims that wait for a claimed answer.
const (
	wireFor  = 30 * time.Second
	blindFor = 500 * time.Millisecond
)

// claim answers {seq, 0} when admitted; {0, ms, 1} when nothing remains
// until the reset ms; {0, ms, 0} to ask again at ms. ARGV: TTL ms, blind
// ms, the claiming store's id, how long a store that asked counts as
// asking (ms), wireFor and blindFor (ms).
//
// Claims are fair between the stores (the processes) sharing a quota: each
// store's claims are counted (field "n:" .. id: the reset of the window of
// its last claim, "+" when made past that reset before an answer told the
// new window, the count, and until when it counts as asking: ARGV[4] ms
// after a probe election (a Transport that lost one waits up to throttle's
// probeRecheck, 250 ms, without asking), five blind intervals after a
// refusal (it asks again after one) and past the reset when told nothing
// remains, three after an admission (a store with nothing more to send
// stops holding the others back at once); and a letter: a (admitted), w
// (waiting) or p (its Transport won a probe election). A store may be ahead of the
// least served of the stores still asking by at most its equal part of
// what remains: when room is plenty nobody is held, and as it shrinks the
// claims go round; the last two per store asking go to whoever asks (a
// permit a waiting store does not take in time would be lost to the whole
// fleet until the reset). Without it, the processes whose answers come
// back first claim again first, and one of three finished in half the time
// of the others.
//
// The counts run across windows, not from each reset: what a window's
// split leaves unequal — the claims made past a reset before an answer
// tells the new window, and the last permits, which go to whoever asks
// first — is made up in the next window. Counted per window, the same
// process (the one that gets the CPU first, on a loaded machine) won those
// 4–7 permits of 60 window after window, and three processes sending 120
// each finished up to 29% apart.
//
// A window's start is guarded too. A store whose last claim was in an
// earlier window counts as asking until ARGV[4] ms after that window
// ended: a Transport told (or whose own answers say) that nothing remains
// waits for the reset without claiming, and the store that claims first
// in the new window — the probe's, whose Transport won the election while
// the others wait for its answer — must not take the window before they
// are back (one took 35 and 37 of 60 at a window's start, and finished
// 33–44% before the others). Past a reset, before an answer tells the new
// window and its room, a store two or more ahead of the least served of
// those asking waits, except for its probe's claim (the probe election
// marks the winner's field "p").
//
// A store new to the quota, or back after not asking for ARGV[4] ms,
// starts level with the least served of those asking (past a reset, of
// those that asked since): it is owed nothing from before. Before any
// answer has told a window, every store starts from 0, so that what one
// claims before the others begin is made up.
var claim = redis.NewScript(quotaNow + `
local blind, nk = tonumber(ARGV[2]), "n:" .. ARGV[3]
redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", now - tonumber(ARGV[5]))
local inflight = redis.call("ZCARD", KEYS[2])
local all = redis.call("HGETALL", KEYS[1])
local mine, least, active, floor, probing = nil, nil, 1, nil, false
for i = 1, #all, 2 do
	local f = all[i]
	if string.sub(f, 1, 2) == "n:" then
		local r, c, till, st = string.match(all[i + 1], "^(%d+)%+?:(%d+):(%d+):?(%a*)")
		r, c, till = tonumber(r) or 0, tonumber(c) or 0, tonumber(till)
		-- a store whose last claim was in an earlier window (as a gate
		-- waits, without asking, for the window after one spent) counts
		-- as asking until ARGV[4] ms after that window ended
		if till and (r < reset or not (known and now < reset)) and r + tonumber(ARGV[4]) > till then
			till = r + tonumber(ARGV[4])
		end
		if f == nk then
			mine, probing = c, st == "p"
		elseif not till or till < now - tonumber(ARGV[4]) then
			redis.call("HDEL", KEYS[1], f)
		else
			if floor == nil or c < floor then floor = c end
			if till >= now then
				active = active + 1
				if least == nil or c < least then least = c end
			end
		end
	end
end
-- a store new to the quota (or back after ARGV[4] ms without asking)
-- starts level with the least served of those asking (past a reset, of
-- those that asked since): it is owed nothing from before. Before the
-- first answer every store starts from 0: what one claims before the
-- others begin is theirs to make up.
if mine == nil then
	if not known then mine = 0
	elseif now < reset then mine = least or 0
	else mine = floor or 0 end
end
if known and now < reset then
	if rem <= 0 then
		-- it asks again at the reset: it counts as asking until then
		redis.call("HSET", KEYS[1], nk, reset .. ":" .. mine .. ":" .. reset .. ":w")
		return {0, reset, 1}
	end
	local room = rem - inflight
	local fair = room > 0 and (least == nil or room <= 2 * active or mine - least < math.floor(room / active))
	if not fair or (not exact and redis.call("ZCOUNT", KEYS[2], now - tonumber(ARGV[6]), "+inf") > 0) then
		redis.call("HSET", KEYS[1], nk, reset .. ":" .. mine .. ":" .. (now + 5 * blind) .. ":w")
		redis.call("PEXPIRE", KEYS[1], ARGV[1])
		return {0, now + blind, 0}
	end
	redis.call("HSET", KEYS[1], nk, reset .. ":" .. (mine + 1) .. ":" .. (now + 3 * blind) .. ":a")
else
	-- claims past the reset, before an answer tells the new window: they
	-- count in it, and a store ahead of the least served of those asking
	-- by two waits (but not its probe) while nobody knows the room
	if not probing and least ~= nil and mine - least >= 2 then
		redis.call("HSET", KEYS[1], nk, reset .. "+:" .. mine .. ":" .. (now + 5 * blind) .. ":w")
		redis.call("PEXPIRE", KEYS[1], ARGV[1])
		return {0, now + blind, 0}
	end
	redis.call("HSET", KEYS[1], nk, reset .. "+:" .. (mine + 1) .. ":" .. (now + 3 * blind) .. ":a")
end
local seq = redis.call("HINCRBY", KEYS[1], "seq", 1)
redis.call("ZADD", KEYS[2], now, seq)
redis.call("PEXPIRE", KEYS[1], ARGV[1])
redis.call("PEXPIRE", KEYS[2], ARGV[1])
return {seq, 0, 0}`)

// asking is how long a store that claimed (or asked to probe) counts as
// still asking: twice throttle's probeRecheck (250 ms), the longest a
// Transport of the fleet waits without asking while another probes.
const asking = 500 * time.Millisecond

// blind is throttle's: how long a claim waits for the answers of the
// claims on the wire.
const blind = 20 * time.Millisecond

// Claim implements throttle.FeedbackStore.
func (s *FeedbackStore) Claim(ctx context.Context, key string) (feedbackstore.Grant, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	v, err := claim.Run(ctx, s.client, []string{s.key(key, "quota"), s.key(key, "wire")}, feedbackTTL, blind.Milliseconds(),
		s.id, asking.Milliseconds(), wireFor.Milliseconds(), blindFor.Milliseconds()).Int64Slice()
	if err != nil {
		return feedbackstore.Grant{}, s.unavailable(err)
	}
	if len(v) != 3 {
		return feedbackstore.Grant{}, fmt.Errorf("redisrepo: claim answered %d values", len(v))
	}
	if v[0] > 0 {
		return feedbackstore.Grant{Seq: v[0]}, nil
	}
	return feedbackstore.Grant{Retry: time.UnixMilli(v[1]), Spent: v[2] == 1}, nil
}

// settle: ARGV claim (0: none), known (0/1), remaining, reset ms, TTL ms.
var settle = redis.NewScript(quotaNow + `
local c, sk, srem, sreset = tonumber(ARGV[1]), ARGV[2] == "1", tonumber(ARGV[3]), tonumber(ARGV[4])
if c > 0 then redis.call("ZREM", KEYS[2], c) end
if sk then
	if not known or sreset > reset then
		known, rem, reset, exact = true, srem, sreset, c > 0
	elseif sreset == reset then
		rem, exact = math.min(rem, srem), exact or c > 0
	end
end
redis.call("HSET", KEYS[1], "k", known and "1" or "0", "rem", rem, "reset", reset, "x", exact and "1" or "0")
redis.call("PEXPIRE", KEYS[1], ARGV[5])
return 1`)

// Settle implements throttle.FeedbackStore.
func (s *FeedbackStore) Settle(ctx context.Context, key string, g feedbackstore.Grant, q feedbackstore.SharedQuota) error {
	known, reset := 0, int64(0)
	if q.Known {
		known, reset = 1, q.Reset.UnixMilli()
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	return s.unavailable(settle.Run(ctx, s.client, []string{s.key(key, "quota"), s.key(key, "wire")},
		g.Seq, known, q.Remaining, reset, feedbackTTL).Err())
}

// Subscribe implements throttle.FeedbackStore. The first subscriber starts
// the store's subscription to the channel (one connection and one
// goroutine per store, whatever the number of subscribers); Close ends it.
// Once the subscription is confirmed, f hears first of the pauses in force
// (a Transport that joins during a pause honours it), then of every notice.
// It waits at most the store's timeout for Redis; if Redis cannot be
// reached, the subscription is made when it can (go-redis reconnects it)
// and f hears only of later notices.
func (s *FeedbackStore) Subscribe(f func(feedbackstore.Notice)) (stop func()) {
	s.mu.Lock()
	id := s.next
	s.next++
	s.subs[id] = f
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	if s.ps == nil && !s.closed {
		s.ps = s.client.Subscribe(ctx, s.channel)
		s.ps.Receive(ctx) // the confirmation: notices published from now on arrive
		ch := s.ps.Channel()
		s.wg.Go(func() {
			for m := range ch {
				s.deliver(m.Payload)
			}
		})
	}
	closed := s.closed
	s.mu.Unlock()
	if !closed {
		ns, _ := s.inForce(ctx)
		for _, n := range ns {
			f(n)
		}
	}
	return func() {
		s.mu.Lock()
		delete(s.subs, id)
		s.mu.Unlock()
	}
}

// deliver passes a published notice to every subscriber; a malformed one
// is dropped.
func (s *FeedbackStore) deliver(msg string) {
	at, key, ok := strings.Cut(msg, " ")
	ns, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil {
		return
	}
	n := feedbackstore.Notice{Key: key}
	if ns != 0 {
		n.Until = time.Unix(0, ns)
	}
	s.mu.Lock()
	subs := make([]func(feedbackstore.Notice), 0, len(s.subs))
	for _, f := range s.subs {
		subs = append(subs, f)
	}
	s.mu.Unlock()
	for _, f := range subs {
		f(n)
	}
}

// Close ends the subscription and waits for its goroutine. It does not
// close the client. It is idempotent.
func (s *FeedbackStore) Close() error {
	s.mu.Lock()
	ps, own := s.ps, s.own
	s.closed, s.ps, s.own = true, nil, false
	s.mu.Unlock()
	var err error
	if ps != nil {
		err = ps.Close()
		s.wg.Wait()
	}
	if own {
		err = errors.Join(err, s.client.Close())
	}
	return err
}
