package redisrepo

import "github.com/redis/go-redis/v9"

// The fast scripts decide a lone try or peek of a repository of one limit,
// for the two algorithms users reach for first, with the least work in
// Redis: no helper functions to define, the Decision computed inline, and
// the state written only when a grant changed it (a refusal or a peek
// leaves it, and its TTL, as they are: the state of a key that was not
// written is brought up to date the same way by the next call). They keep
// the main script's state format, so a key may see both, and take the
// limit's first key and five arguments: op, n, clock (as the main script's)
// and the two fields of the limit they need; the differential tests hold
// them to the local limiters too.
const luaFastHead = `
local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end
local k, op, n, p1, p2 = KEYS[1], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[4]), tonumber(ARGV[5])
local t, slack = tonumber(ARGV[3]), 3600000000
if not t then
  local tm = redis.call('TIME')
  t, slack = tonumber(tm[1]) * 1000000 + tonumber(tm[2]), 0
end
local ok, v = pcall(redis.call, 'GET', k)
if not ok then return redis.error_reply('THROTTLE foreign value at key ' .. k .. ': not a string') end
local want = n
if op == 'peek' then want = 1 end
local function save(tok, ttl)
  local ms = idiv(ttl + slack + 999, 1000)
  if ms <= 0 then redis.call('DEL', k) else redis.call('SET', k, tok, 'PX', ms) end
end
`

// luaFastGCRA is GCRA whose emission interval is a whole number of
// microseconds: its state "tat:0".
const luaFastGCRA = luaFastHead + `
local us, burst = p1, p2
local tat = 0
if v then
  local a = string.match(v, '^(%-?%d+):0$')
  if not a then return redis.error_reply('THROTTLE foreign value at key ' .. k .. ': unexpected content') end
  tat = tonumber(a)
end
local base = math.max(tat, t)
local allowed, retry = 0, base + want * us - t - us * burst
if retry <= 0 then
  allowed, retry = 1, 0
  if op == 'try' then
    tat = base + n * us
    base = tat
    save(string.format('%.0f:0', tat), tat - t)
  end
end
local free = t - base + us * burst
local rem = 0
if free > 0 then rem = math.min(idiv(free, us), burst) end
return {allowed, burst, rem, base - t, retry}
`

// luaFastSliding is the sliding window: its state "start:prev:curr".
const luaFastSliding = luaFastHead + `
local lim, win = p1, p2
local w = idiv(t, win) * win
local st, p, c = w, 0, 0
if v then
  local a, b, d = string.match(v, '^(%-?%d+):(%d+):(%d+)$')
  if not a then return redis.error_reply('THROTTLE foreign value at key ' .. k .. ': unexpected content') end
  st, p, c = tonumber(a), tonumber(b), tonumber(d)
  if w > st then
    if w == st + win then p, c = c, 0 else p, c = 0, 0 end
    st = w
  end
end
local function due(prev, curr)
  local room = lim - curr - want
  if room < 0 then return -1 end
  if prev == 0 then return 0 end
  return math.max(win - idiv(room * win, prev), 0)
end
local e = t - st
local allowed, retry = 0, 0
if c + want <= lim and p * (win - e) <= (lim - c - want) * win then
  allowed = 1
else
  local d = due(p, c)
  if d >= 0 and d < win then retry = st + d - t else retry = st + win + due(c, 0) - t end
end
local reset = 0
if allowed == 1 and op == 'try' then
  c = c + n
  reset = st + 2 * win - t
  save(string.format('%.0f:%.0f:%.0f', st, p, c), reset)
elseif c > 0 then reset = st + 2 * win - t
elseif p > 0 then reset = st + win - t end
local x = p * (win - e)
local used = idiv(x, win)
if used * win < x then used = used + 1 end
return {allowed, lim, math.max(lim - c - used, 0), reset, retry}
`

// fast is a fast script and where, in the main script's ARGV (from 0), the
// two fields it needs are.
type fast struct {
	script *redis.Script
	i, j   int
}

// args is the fast script's ARGV, from the main script's.
func (f *fast) args(main []any) []any { return []any{main[0], main[1], main[2], main[f.i], main[f.j]} }

var (
	fastGCRA    = &fast{redis.NewScript(luaFastGCRA), 7, 10}   // us, burst
	fastSliding = &fast{redis.NewScript(luaFastSliding), 7, 8} // limit, window
)

// fastFor is the fast script for a repository of limits, or nil.
func fastFor(limits []limit) *fast {
	if len(limits) != 1 {
		return nil
	}
	switch a := limits[0].args; {
	case a[0] == codeGCRA && a[3] == int64(1): // a whole-microsecond interval
		return fastGCRA
	case a[0] == codeSlidingWindow:
		return fastSliding
	}
	return nil
}
