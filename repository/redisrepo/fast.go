package redisrepo

import "github.com/redis/go-redis/v9"

// The fast scripts decide tries and peeks of a repository of one limit, for
// the two algorithms users reach for first, with the least work in Redis:
// two helper functions to define, the Decision computed inline, and the
// state written only when a grant changed it (a refusal or a peek leaves
// it, and its TTL, as they are: the state of a key that was not written is
// brought up to date the same way by the next call). They keep the main
// script's state format, so a key may see both; the differential tests
// hold them to the local limiters too.
//
// One call takes the limit's first key and five arguments: op, n, clock (as
// the main script's) and the two fields of the limit the script needs. A
// batch takes one key per call and '*', the two fields, then op, n and
// clock per call; its reply has one element per call, a Decision or the
// call's error as a string. Every call of a batch shares one TIME.
const luaFastHead = `
local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end
local now
local function clock(c)
  if c ~= '' then return tonumber(c), 3600000000 end
  if not now then
    local tm = redis.call('TIME')
    now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
  end
  return now, 0
end
local function save(k, tok, ttl, slack)
  local ms = idiv(ttl + slack + 999, 1000)
  if ms <= 0 then redis.call('DEL', k) else redis.call('SET', k, tok, 'PX', ms) end
end
local p1, p2
local function decide(k, op, n, t, slack)
  local ok, v = pcall(redis.call, 'GET', k)
  if not ok then return 'THROTTLE foreign value at key ' .. k .. ': not a string' end
  local want = n
  if op == 'peek' then want = 1 end
`

// luaFastTail runs decide for one call or a batch.
const luaFastTail = `
end
if ARGV[1] ~= '*' then
  p1, p2 = tonumber(ARGV[4]), tonumber(ARGV[5])
  local r = decide(KEYS[1], ARGV[1], tonumber(ARGV[2]), clock(ARGV[3]))
  if type(r) == 'string' then return redis.error_reply(r) end
  return r
end
p1, p2 = tonumber(ARGV[2]), tonumber(ARGV[3])
local out = {}
for j = 1, #KEYS do
  local a = 1 + 3 * j
  out[j] = decide(KEYS[j], ARGV[a], tonumber(ARGV[a + 1]), clock(ARGV[a + 2]))
end
return out
`

// luaFastGCRA is GCRA whose emission interval is a whole number of
// microseconds: its state "tat:0".
const luaFastGCRA = luaFastHead + `
  local us, burst = p1, p2
  local tat = 0
  if v then
    local a = string.match(v, '^(%-?%d+):0$')
    if not a then return 'THROTTLE foreign value at key ' .. k .. ': unexpected content' end
    tat = tonumber(a)
  end
  local base = math.max(tat, t)
  local allowed, retry = 0, base + want * us - t - us * burst
  if retry <= 0 then
    allowed, retry = 1, 0
    if op == 'try' then
      tat = base + n * us
      base = tat
      save(k, string.format('%.0f:0', tat), tat - t, slack)
    end
  end
  local free = t - base + us * burst
  local rem = 0
  if free > 0 then rem = math.min(idiv(free, us), burst) end
  return {allowed, burst, rem, base - t, retry}
` + luaFastTail

// luaFastSliding is the sliding window: its state "start:prev:curr". It
// alone needs luaWide: a script defines its helpers anew on every call.
const luaFastSliding = luaWide + luaFastHead + `
  local lim, win = p1, p2
  local w = idiv(t, win) * win
  local st, p, c = w, 0, 0
  if v then
    local a, b, d = string.match(v, '^(%-?%d+):(%d+):(%d+)$')
    if not a then return 'THROTTLE foreign value at key ' .. k .. ': unexpected content' end
    st, p, c = tonumber(a), tonumber(b), tonumber(d)
    if w > st then
      if w == st + win then p, c = c, 0 else p, c = 0, 0 end
      st = w
    end
  end
  local function due(prev, curr)
    local room = lim - curr - want
    if room < 0 then return -1 end
    if prev == 0 or room >= prev then return 0 end
    return math.max(win - muldiv(room, win, prev), 0)
  end
  local e = t - st
  local allowed, retry = 0, 0
  if c + want <= lim and mulle(p, win - e, lim - c - want, win) then
    allowed = 1
  else
    local d = due(p, c)
    if d >= 0 and d < win then retry = st + d - t else retry = st + win + due(c, 0) - t end
  end
  local reset = 0
  if allowed == 1 and op == 'try' then
    c = c + n
    reset = st + 2 * win - t
    save(k, string.format('%.0f:%.0f:%.0f', st, p, c), reset, slack)
  elseif c > 0 then reset = st + 2 * win - t
  elseif p > 0 then reset = st + win - t end
  local used = muldiv(p, win - e, win)
  if not mulle(p, win - e, used, win) then used = used + 1 end
  return {allowed, lim, math.max(lim - c - used, 0), reset, retry}
` + luaFastTail

// fast is a fast script and which of its limit's fields (limit.args) it
// needs.
type fast struct {
	script *redis.Script
	i, j   int
}

// args is the fast script's ARGV for one call: op, n, clock and the two
// fields of l.
func (f *fast) args(op any, n int, clock string, l *limit) []any {
	return []any{op, n, clock, l.args[f.i], l.args[f.j]}
}

// batch is the fast script's keys and ARGV for calls (each with the ARGV
// of args).
func (f *fast) batch(calls []*call) ([]string, []any) {
	keys := make([]string, len(calls))
	args := append(make([]any, 0, 3+3*len(calls)), "*", calls[0].args[3], calls[0].args[4])
	for i, c := range calls {
		keys[i] = c.keys[0]
		args = append(args, c.args[:3]...)
	}
	return keys, args
}

var (
	fastGCRA    = &fast{redis.NewScript(luaFastGCRA), 1, 4}    // us, burst
	fastSliding = &fast{redis.NewScript(luaFastSliding), 1, 2} // limit, window
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
