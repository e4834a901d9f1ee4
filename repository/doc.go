// Package repository holds one limiter per key, behind one interface that the
// in-memory store and the Redis store share.
//
// Most callers want NewMemory: a factory makes each key's limiter on the
// key's first use, and the repository keeps it for the key's later calls.
//
//	repo := repository.NewMemory(func(key string) limiters.Limiter {
//		return limiters.NewGCRA(limiters.PerSecond(10), 20)
//	}, repository.WithIdleTimeout(10*time.Minute), repository.WithMaxKeys(1_000_000))
//	defer repo.Close()
//	d, err := repo.TryAcquire(ctx, clientIP, 1)
//
// For millions of keys that all get the same token bucket, NewGCRA makes the
// same decisions as NewMemory with a limiters.NewGCRA factory in about a
// third of the memory: each key is one 8-byte timestamp next to its key in a
// sharded map (about 72 bytes a key, the key included), forgotten as soon as
// its bucket is full again.
//
//	repo := repository.NewGCRA(limiters.PerSecond(10), 20, repository.WithMaxKeys(10_000_000))
//
// # Memory
//
// Keys are spread over up to 256 shards by their hash, each with its own lock,
// hash table and LRU list. A key costs its limiter plus about 100 bytes (its
// entry, its hash-table slot and its string). The repository holds no
// goroutines, none per key and none in the background; an idle limiter holds
// no timer either. Calls for an existing key do not allocate.
//
// # Expiry
//
// With WithIdleTimeout(d), a key whose limiter is idle — full again, nobody
// waiting, no permits held — and which has not been used for d is forgotten,
// and its limiter closed. Expiry is lazy and amortized: every call that
// touches a shard also examines one or two of that shard's least recently
// used keys (a cursor walks through those unused for d, so keys that are old
// but not yet full again do not hold up the rest). A shard that receives no
// calls forgets nothing; Sweep forgets every expired key at once.
//
// # The bound
//
// With WithMaxKeys(n), the number of keys never exceeds n, in total across
// the shards. A new key beyond the bound evicts a key of its own shard (or,
// if that shard has none to give, of another): the least recently used idle
// one, or else the least recently used one without waiters, calls in flight
// or held Concurrency permits — that key's limiter loses its state, so a key
// that was not yet full again starts over full. Eviction order is LRU within
// a shard; small bounds use fewer shards (one for n < 32), so their order is
// exactly LRU. Each eviction examines at most 8 keys per shard. When no key
// can be evicted, the new key's call fails with ErrTooManyKeys: a flood of
// unique keys never grows memory past the bound.
//
// A limiter is closed when it is forgotten, and only when no call through the
// repository is using it, so those calls never see a closed limiter. A
// limiter obtained with Get, though, may be forgotten and replaced.
//
// Concurrency limiters are recognised as holding permits when their Decision
// shows Remaining < Limit with nothing to wait for (ResetAfter == 0). A Chain
// mixing a Concurrency limiter with a rate limiter does not show this, so
// bound such keys generously: evicting one while it holds permits would make
// a later Release return them to its fresh successor, which panics on
// receiving more permits than it holds.
package repository
