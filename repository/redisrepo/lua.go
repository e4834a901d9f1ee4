package redisrepo

import (
	"strings"

	"github.com/redis/go-redis/v9"
)

// The scripts work in integer microseconds (Redis's TIME resolution; Lua's
// numbers are doubles, exact below 2^53, which microseconds since the epoch
// stay well under). An emission interval is kept exactly as us + fr/den
// microseconds, the way package limiters keeps nanoseconds, so rates such as
// 3/s never drift. New checks the bounds that keep every product below 2^53.
//
// Every script is the prelude, the code of the algorithms it serves, and the
// main part. The ARGV layout of one call is
//
//	1 op: try | peek | members | reserve | cancel | release | renew
//	2 n   3 clock (µs; empty: TIME)   4 max wait (µs; -1: none)
//	5 lease id   6 number of limits, then 6 fields per limit
//	(alg, p1..p5), then, for cancel, one token per limit, and for release
//	and renew the lease members.
//
// Each limit owns KEYS[2i-1] and KEYS[2i] (the second only for the sliding
// log); they share one hash tag. A batch of calls of one repository goes as
// one call of the script; see the end of luaMain.
const luaPrelude = `
local NEVER = -1
-- Redis expires keys by its real clock. A clock driven by a test does not
-- follow it, so then every TTL gets an hour of slack (a key kept past its
-- TTL holds a state equal to a full limiter: nothing else changes).
local SLACK = 0
local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end
local function fmt(x) return string.format('%.0f', x) end
local function foreign(k, why)
  return redis.error_reply('THROTTLE foreign value at key ' .. k .. ': ' .. why)
end
local function get(k)
  local ok, v = pcall(redis.call, 'GET', k)
  if not ok then error(foreign(k, 'not a string')) end
  return v
end
-- fine values: us + f/den microseconds, 0 <= f < den
local function times(L, n)
  local t = n * L.fr
  local q = idiv(t, L.den)
  return n * L.us + q, t - q * L.den
end
local function add(L, au, af, bu, bf)
  local u, f = au + bu, af + bf
  if f >= L.den then return u + 1, f - L.den end
  return u, f
end
local function sub(L, au, af, bu, bf)
  local u, f = au - bu, af - bf
  if f < 0 then return u - 1, f + L.den end
  return u, f
end
local function less(au, af, bu, bf) return au < bu or (au == bu and af < bf) end
local function ceil(u, f) if f > 0 then return u + 1 end return u end
local function count(L, du, df)
  if du < 0 then return 0 end
  return idiv(du * L.den + df, L.us * L.den + L.fr)
end
local function expire(k, us)
  local ms = idiv(us + SLACK + 999, 1000)
  if ms <= 0 then redis.call('DEL', k) else redis.call('PEXPIRE', k, ms) end
end
local function setx(k, v, us)
  local ms = idiv(us + SLACK + 999, 1000)
  if ms <= 0 then redis.call('DEL', k) else redis.call('SET', k, v, 'PX', ms) end
end
local function parse(k, v, pat)
  local a, b, c = string.match(v, pat)
  if not a then error(foreign(k, 'unexpected content')) end
  return tonumber(a), tonumber(b), tonumber(c)
end
local A = {}
`

// luaAlgos is each algorithm's code, keyed by its one-letter code. Each
// defines load(L, t), wait(L, t, n), take(L, t, n), state(L, t) → remaining,
// reset, save(L, t) → token, and, for the bucket algorithms, refund(L, n).
var luaAlgos = map[string]string{
	// GCRA: the theoretical arrival time, "us:f".
	codeGCRA: `
A.g = {}
function A.g.load(L, t)
  local v = get(L.k)
  if v then L.tu, L.tf = parse(L.k, v, '^(%-?%d+):(%d+)$') else L.tu, L.tf = 0, 0 end
  L.tolu, L.tolf = times(L, L.burst)
end
local function gbase(L, t)
  if ceil(L.tu, L.tf) < t then return t, 0 end
  return L.tu, L.tf
end
function A.g.wait(L, t, n)
  local bu, bf = gbase(L, t)
  local nu, nf = add(L, bu, bf, times(L, n))
  local au, af = add(L, t, 0, L.tolu, L.tolf)
  if not less(au, af, nu, nf) then return 0 end
  return ceil(sub(L, nu, nf, au, af))
end
function A.g.take(L, t, n)
  local bu, bf = gbase(L, t)
  L.tu, L.tf = add(L, bu, bf, times(L, n))
end
function A.g.refund(L, n)
  L.tu, L.tf = sub(L, L.tu, L.tf, times(L, n))
end
-- queued counts the permits reserved beyond a full bucket's worth.
function A.g.queued(L, t)
  local ou, of = sub(L, L.tu, L.tf, t, 0)
  ou, of = sub(L, ou, of, L.tolu, L.tolf)
  if ou < 0 or (ou == 0 and of == 0) then return 0 end
  return count(L, add(L, ou, of, sub(L, L.us, L.fr, 0, 1)))
end
function A.g.state(L, t)
  local bu, bf = gbase(L, t)
  local fu, ff = sub(L, t, 0, bu, bf)
  fu, ff = add(L, fu, ff, L.tolu, L.tolf)
  return math.min(count(L, fu, ff), L.burst), math.max(ceil(sub(L, bu, bf, t, 0)), 0)
end
function A.g.save(L, t)
  local tok = fmt(L.tu) .. ':' .. fmt(L.tf)
  setx(L.k, tok, ceil(sub(L, L.tu, L.tf, t, 0)))
  return tok
end
`,
	// Token bucket: the credit (the time to refill from empty) and the
	// time it was last brought up to date, "us:f:last".
	codeTokenBucket: `
A.t = {}
function A.t.load(L, t)
  L.tolu, L.tolf = times(L, L.burst)
  local v = get(L.k)
  if v then L.cu, L.cf, L.last = parse(L.k, v, '^(%-?%d+):(%d+):(%-?%d+)$')
  else L.cu, L.cf, L.last = L.tolu, L.tolf, t end
end
local function capfull(L, u, f)
  local mu, mf = add(L, L.tolu, L.tolf, 1, 0)
  if less(u, f, mu, mf) then return u, f end
  return L.tolu, L.tolf
end
local function refill(L, t)
  if t <= L.last then return end
  local dt = t - L.last
  L.last = t
  if dt >= L.tolu + 2 then L.cu, L.cf = L.tolu, L.tolf return end
  L.cu, L.cf = capfull(L, add(L, L.cu, L.cf, dt, 0))
end
function A.t.wait(L, t, n)
  refill(L, t)
  -- credit counts from last, which a reservation may have put ahead of t
  local nu, nf = times(L, n)
  nu = nu + L.last - t
  if not less(L.cu, L.cf, nu, nf) then return 0 end
  return ceil(sub(L, nu, nf, L.cu, L.cf))
end
function A.t.take(L, t, n)
  refill(L, t)
  L.cu, L.cf = sub(L, L.cu, L.cf, times(L, n))
end
function A.t.refund(L, n)
  L.cu, L.cf = capfull(L, add(L, L.cu, L.cf, times(L, n)))
end
-- queued counts the permits reserved beyond the credit there is.
function A.t.queued(L, t)
  refill(L, t)
  local ou, of = sub(L, L.last - t, 0, L.cu, L.cf)
  if ou < 0 or (ou == 0 and of == 0) then return 0 end
  return count(L, add(L, ou, of, sub(L, L.us, L.fr, 0, 1)))
end
function A.t.state(L, t)
  refill(L, t)
  local ahead = math.max(L.last - t, 0)
  return math.min(count(L, L.cu, L.cf), L.burst), math.max(ceil(sub(L, L.tolu, L.tolf, L.cu, L.cf)), 0) + ahead
end
function A.t.save(L, t)
  local tok = fmt(L.cu) .. ':' .. fmt(L.cf) .. ':' .. fmt(L.last)
  local _, reset = A.t.state(L, t)
  setx(L.k, tok, reset)
  return tok
end
`,
	// Leaky bucket: when the next grant may be emitted, and when the latest
	// grant starts, "us:f:start".
	codeLeakyBucket: `
A.l = {}
function A.l.load(L, t)
  local v = get(L.k)
  if v then L.nu, L.nf, L.ls = parse(L.k, v, '^(%-?%d+):(%d+):(%-?%d+)$') else L.nu, L.nf, L.ls = 0, 0, 0 end
end
function A.l.wait(L, t, n)
  if less(t, 0, L.nu, L.nf) then return ceil(sub(L, L.nu, L.nf, t, 0)) end
  return 0
end
function A.l.take(L, t, n)
  local bu, bf = t, 0
  if ceil(L.nu, L.nf) >= t and less(L.nu, L.nf, bu, bf) then bu, bf = L.nu, L.nf end
  L.nu, L.nf = add(L, bu, bf, times(L, n))
  L.ls = t
end
function A.l.refund(L, n)
  L.nu, L.nf = sub(L, L.nu, L.nf, times(L, n))
  L.ls = math.min(L.ls, ceil(L.nu, L.nf))
end
-- queued counts the emission intervals reserved to start after t.
function A.l.queued(L, t)
  if L.ls <= t then return 0 end
  return idiv((L.ls - t) * L.den + L.us * L.den + L.fr - 1, L.us * L.den + L.fr)
end
function A.l.state(L, t)
  local busy = 0
  if less(t, 0, L.nu, L.nf) then busy = ceil(sub(L, L.nu, L.nf, t, 0)) end
  return math.max(L.burst - A.l.queued(L, t), 0), busy
end
function A.l.save(L, t)
  local tok = fmt(L.nu) .. ':' .. fmt(L.nf) .. ':' .. fmt(L.ls)
  setx(L.k, tok, math.max(ceil(sub(L, L.nu, L.nf, t, 0)), L.ls - t))
  return tok
end
`,
	// Fixed window: the window's start and its count, "start:count".
	codeFixedWindow: `
A.f = {}
function A.f.load(L, t)
  local v = get(L.k)
  if v then L.st, L.c = parse(L.k, v, '^(%-?%d+):(%d+)$') else L.st, L.c = -1, 0 end
end
local function froll(L, t)
  local w = idiv(t, L.win) * L.win
  if w > L.st then L.st, L.c = w, 0 end
end
function A.f.wait(L, t, n)
  froll(L, t)
  if L.c + n <= L.lim then return 0 end
  return L.st + L.win - t
end
function A.f.take(L, t, n) froll(L, t) L.c = L.c + n end
function A.f.state(L, t) froll(L, t) return L.lim - L.c, L.st + L.win - t end
function A.f.save(L, t)
  if L.c == 0 then redis.call('DEL', L.k) return '' end
  local tok = fmt(L.st) .. ':' .. fmt(L.c)
  setx(L.k, tok, L.st + L.win - t)
  return tok
end
`,
	// Sliding window: the current window's start and the previous and
	// current counts, "start:prev:curr".
	codeSlidingWindow: `
A.s = {}
function A.s.load(L, t)
  local v = get(L.k)
  if v then L.st, L.p, L.c = parse(L.k, v, '^(%-?%d+):(%d+):(%d+)$') else L.st, L.p, L.c = nil, 0, 0 end
end
local function sroll(L, t)
  local w = idiv(t, L.win) * L.win
  if L.st == nil then L.st, L.p, L.c = w, 0, 0
  elseif w <= L.st then
  elseif w == L.st + L.win then L.st, L.p, L.c = w, L.c, 0
  else L.st, L.p, L.c = w, 0, 0 end
end
local function sdue(L, prev, curr, n)
  local room = L.lim - curr - n
  if room < 0 then return -1 end
  if prev == 0 then return 0 end
  return math.max(L.win - idiv(room * L.win, prev), 0)
end
function A.s.wait(L, t, n)
  sroll(L, t)
  local e = t - L.st
  if L.c + n <= L.lim and L.p * (L.win - e) <= (L.lim - L.c - n) * L.win then return 0 end
  local d = sdue(L, L.p, L.c, n)
  if d >= 0 and d < L.win then return L.st + d - t end
  return L.st + L.win + sdue(L, L.c, 0, n) - t
end
function A.s.take(L, t, n) sroll(L, t) L.c = L.c + n end
function A.s.state(L, t)
  sroll(L, t)
  local e = t - L.st
  local x = L.p * (L.win - e)
  local w = idiv(x, L.win)
  if w * L.win < x then w = w + 1 end
  local reset = 0
  if L.c > 0 then reset = L.st + 2 * L.win - t elseif L.p > 0 then reset = L.st + L.win - t end
  return math.max(L.lim - L.c - w, 0), reset
end
function A.s.save(L, t)
  local _, reset = A.s.state(L, t)
  local tok = fmt(L.st) .. ':' .. fmt(L.p) .. ':' .. fmt(L.c)
  setx(L.k, tok, reset)
  return tok
end
`,
	// Sliding log: a sorted set of grants (member "seq:n", score the grant's
	// time) at KEYS[2i-1], and "total:seq" at KEYS[2i].
	codeSlidingLog: `
A.o = {}
local function zrange(k, ...)
  local ok, v = pcall(redis.call, 'ZRANGE', k, ...)
  if not ok then error(foreign(k, 'not a sorted set')) end
  return v
end
local function nof(k, m)
  local n = string.match(m, '^%d+:(%d+)$')
  if not n then error(foreign(k, 'unexpected member')) end
  return tonumber(n)
end
function A.o.load(L, t)
  local v = get(L.k2)
  if v then L.tot, L.seq = parse(L.k2, v, '^(%d+):(%d+)$') else L.tot, L.seq = 0, 0 end
  L.last = nil
  local e = zrange(L.k, -1, -1, 'WITHSCORES')
  if e[1] then nof(L.k, e[1]) L.last = tonumber(e[2]) end
end
local function oexpire(L, t)
  local cut = t - L.win
  local old = zrange(L.k, '-inf', cut, 'BYSCORE')
  if #old == 0 then return end
  for _, m in ipairs(old) do L.tot = L.tot - nof(L.k, m) end
  redis.call('ZREMRANGEBYSCORE', L.k, '-inf', cut)
  if L.tot <= 0 then L.tot, L.last = 0, nil end
end
function A.o.wait(L, t, n)
  oexpire(L, t)
  local over = L.tot + n - L.lim
  if over <= 0 then return 0 end
  -- each entry holds at least one permit: over entries suffice
  local e = zrange(L.k, 0, over - 1, 'WITHSCORES')
  for i = 1, #e, 2 do
    over = over - nof(L.k, e[i])
    if over <= 0 then return tonumber(e[i + 1]) + L.win - t end
  end
  return NEVER
end
function A.o.take(L, t, n)
  oexpire(L, t)
  if L.last and L.last > t then t = L.last end
  L.seq = L.seq + 1
  redis.call('ZADD', L.k, t, fmt(L.seq) .. ':' .. fmt(n))
  L.tot, L.last = L.tot + n, t
end
function A.o.state(L, t)
  oexpire(L, t)
  if L.last == nil then return L.lim, 0 end
  return L.lim - L.tot, L.last + L.win - t
end
function A.o.save(L, t)
  if L.last == nil then redis.call('DEL', L.k, L.k2) return '' end
  local ttl = L.last + L.win - t
  setx(L.k2, fmt(L.tot) .. ':' .. fmt(L.seq), ttl)
  expire(L.k, ttl)
  return ''
end
`,
	// Concurrency: a sorted set of leases, member "id:j", score its expiry.
	codeConcurrency: `
A.c = {}
function A.c.load(L, t)
  local ok, v = pcall(redis.call, 'ZREMRANGEBYSCORE', L.k, '-inf', t)
  if not ok then error(foreign(L.k, 'not a sorted set')) end
  L.held = redis.call('ZCARD', L.k)
end
function A.c.wait(L, t, n)
  if L.held + n <= L.lim then return 0 end
  return NEVER
end
function A.c.take(L, t, n)
  for j = 1, n do redis.call('ZADD', L.k, t + L.lease, L.id .. ':' .. j) end
  L.held = L.held + n
end
function A.c.state(L, t) return L.lim - L.held, 0 end
function A.c.save(L, t)
  if L.held > 0 then expire(L.k, L.lease) end
  return ''
end
`,
}

const luaMain = `
local function limits(V, b, nl)
  local P = {}
  for i = 1, nl do
    local o = b + (i - 1) * 6
    P[i] = {V[o + 1], tonumber(V[o + 2]), tonumber(V[o + 3]), tonumber(V[o + 4]), tonumber(V[o + 5]), tonumber(V[o + 6])}
  end
  return P
end
local now
local function clock(c)
  if c ~= '' then SLACK = 3600000000 return tonumber(c) end
  if not now then
    local tm = redis.call('TIME')
    now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
  end
  return now
end
-- one serves one call: limit i's keys are K[ko + 2i - 1] and K[ko + 2i],
-- and the call's extra arguments V[eo + 1 .. eo + ne].
local function one(P, nl, K, ko, op, n, t, maxwait, id, V, eo, ne)
  local Ls = {}
  for i = 1, nl do
    local p = P[i]
    local L = {alg = p[1], k = K[ko + 2 * i - 1], k2 = K[ko + 2 * i], id = id}
    if L.alg == 'g' or L.alg == 't' or L.alg == 'l' then
      L.us, L.fr, L.den, L.burst, L.qlim = p[2], p[3], p[4], p[5], p[6]
      L.lim = L.burst
    elseif L.alg == 'c' then L.lim, L.lease = p[2], p[3]
    else L.lim, L.win = p[2], p[3] end
    Ls[i] = L
  end
  if op == 'release' or op == 'renew' then
    for i = 1, nl do
      local L = Ls[i]
      if L.alg == 'c' then
        for j = eo + 1, eo + ne do
          if op == 'release' then redis.call('ZREM', L.k, V[j])
          else redis.call('ZADD', L.k, 'XX', t + L.lease, V[j]) end
        end
        if op == 'renew' and redis.call('EXISTS', L.k) == 1 then expire(L.k, L.lease) end
      end
    end
    return 1
  end
  for i = 1, nl do A[Ls[i].alg].load(Ls[i], t) end
  if op == 'cancel' then
    local given = 0
    for i = 1, nl do
      local L = Ls[i]
      if A[L.alg].refund and A[L.alg].save(L, t) == V[eo + i] then
        A[L.alg].refund(L, n)
        A[L.alg].save(L, t)
        given = 1
      end
    end
    return given
  end
  local function waitall(at, k)
    local d = 0
    for i = 1, nl do
      local w = A[Ls[i].alg].wait(Ls[i], at, k)
      if w == NEVER then return NEVER end
      if w > d then d = w end
    end
    return d
  end
  if op == 'reserve' then
    for i = 1, nl do
      local L = Ls[i]
      if L.qlim and L.qlim > 0 and A[L.alg].queued(L, t) + n > L.qlim then return {2, 0} end
    end
    local at = t
    for _ = 1, 64 do
      local d = waitall(at, n)
      if d == NEVER then return {3, 0} end
      if d == 0 then break end
      at = at + d
    end
    if waitall(at, n) ~= 0 then return {3, 0} end
    if maxwait >= 0 and at - t > maxwait then return {0, at - t} end
    local out = {1, at - t}
    for i = 1, nl do
      A[Ls[i].alg].take(Ls[i], at, n)
      out[#out + 1] = A[Ls[i].alg].save(Ls[i], t)
    end
    return out
  end
  if op == 'members' then
    -- each limit's own state for a request of n: lim, remaining, reset,
    -- the wait for n, the wait for more than remaining (the leaky
    -- bucket's: for its next slot); NEVER when waiting will not do
    local out = {}
    for i = 1, nl do
      local L, a = Ls[i], A[Ls[i].alg]
      local r, z = a.state(L, t)
      local w, nx = 0, NEVER
      if n > L.lim then w = NEVER elseif n > 0 then w = a.wait(L, t, n) end
      if L.alg == 'l' then nx = a.wait(L, t, 1)
      elseif r < L.lim then nx = a.wait(L, t, r + 1) end
      out[#out + 1] = L.lim
      out[#out + 1] = r
      out[#out + 1] = z
      out[#out + 1] = w
      out[#out + 1] = nx
    end
    return out
  end
  -- try and peek
  local k = n
  if op == 'peek' then k = 1 end
  local allowed, retry = 1, 0
  for i = 1, nl do
    local w = A[Ls[i].alg].wait(Ls[i], t, k)
    if w ~= 0 then
      allowed = 0
      if w > retry then retry = w end
    end
  end
  if op == 'try' and allowed == 1 then
    for i = 1, nl do A[Ls[i].alg].take(Ls[i], t, n) end
  end
  local lim, rem, reset = 0, -1, 0
  for i = 1, nl do
    local r, z = A[Ls[i].alg].state(Ls[i], t)
    if rem < 0 or r < rem then rem, lim = r, Ls[i].lim end
    if z > reset then reset = z end
    -- a peek saves too: the state is the same, brought up to date (the
    -- sliding log's expired entries are gone), and a full limiter is deleted
    A[Ls[i].alg].save(Ls[i], t)
  end
  if allowed == 1 then retry = 0 end
  return {allowed, lim, rem, reset, retry}
end
if ARGV[1] ~= '*' then
  local nl = tonumber(ARGV[6])
  return one(limits(ARGV, 6, nl), nl, KEYS, 0, ARGV[1], tonumber(ARGV[2]), clock(ARGV[3]), tonumber(ARGV[4]), ARGV[5], ARGV, 6 + 6 * nl, #ARGV - 6 - 6 * nl)
end
-- A batch: '*', the number of limits and their fields, then per call op,
-- n, clock, max wait, lease id, the number of extra arguments and those;
-- each call has 2 × nl keys. The reply has one element per call: its
-- reply, or its error as a string. Every call shares one TIME.
local nl = tonumber(ARGV[2])
local P = limits(ARGV, 2, nl)
local out, i, ko = {}, 3 + 6 * nl, 0
while i <= #ARGV do
  local ne = tonumber(ARGV[i + 5])
  local ok, r = pcall(one, P, nl, KEYS, ko, ARGV[i], tonumber(ARGV[i + 1]), clock(ARGV[i + 2]), tonumber(ARGV[i + 3]), ARGV[i + 4], ARGV, i + 5, ne)
  if not ok then
    if type(r) == 'table' and r.err then r = r.err else r = tostring(r) end
  end
  out[#out + 1] = r
  i, ko = i + 6 + ne, ko + 2 * nl
end
return out
`

// The algorithms' one-letter codes in the scripts.
const (
	codeGCRA          = "g"
	codeTokenBucket   = "t"
	codeLeakyBucket   = "l"
	codeFixedWindow   = "f"
	codeSlidingWindow = "s"
	codeSlidingLog    = "o"
	codeConcurrency   = "c"
)

// newScript builds the script serving the algorithms codes.
func newScript(codes ...string) *redis.Script {
	var b strings.Builder
	b.WriteString(luaPrelude)
	seen := map[string]bool{}
	for _, c := range codes {
		if !seen[c] {
			seen[c] = true
			b.WriteString(luaAlgos[c])
		}
	}
	b.WriteString(luaMain)
	return redis.NewScript(b.String())
}
