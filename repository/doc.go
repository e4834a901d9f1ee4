// Package repository holds one limiter per key, behind the Repository
// interface (and Admin, for operators), and implements it with the memory
// repositories: NewMemory for any limiter, NewGCRA for compact token
// buckets. A store kept outside the process implements the same interfaces.
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
// same decisions as NewMemory with a limiters.NewGCRA factory in a little
// less memory: each key is one 8-byte timestamp next to its key in a
// sharded map (about 72 bytes a key, the key included), forgotten as soon as
// its bucket is full again, and Acquire waits by reservation, with no
// queue.
//
//	repo := repository.NewGCRA(limiters.PerSecond(10), 20, repository.WithMaxKeys(10_000_000))
//
// # Memory
//
// Keys are spread over up to 256 shards by their hash, each with its own lock,
// hash table and LRU list. A key costs about 100 bytes (its entry, its
// hash-table slot and its string) plus its limiter; a key whose limiter is a
// GCRA or a TokenBucket has none until a caller must wait for it or Get asks
// for it: its entry holds the bucket's state, one timestamp, and the
// repository decides its calls with the bucket's arithmetic (see NewMemory).
// The repository holds no goroutines, none per key and none in the
// background; an idle limiter holds no timer either. Calls for an existing
// key do not allocate.
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
// the shards. A new key beyond the bound first takes the place of a key of
// its own shard (or, if that shard has none to give, of another) that is
// full again: forgetting it loses nothing. When there is none, the choice
// is WithOverflow's, and it matters when clients can mint keys (a key taken
// from a header, say):
//
//   - EvictStale (the default) evicts the key whose loss admits the least:
//     the fewest permits used and, among equals, the more recently used, so
//     that a flood of new keys used once does not push out a key that has
//     used more, and a client cannot cheaply reset its own limit. The
//     evicted key starts over full; Stats.Evicted counts such evictions.
//   - RefuseNew refuses the new key with ErrTooManyKeys (Stats.Refused
//     counts them): no key ever loses its state to the bound, and new keys
//     are turned away while the repository is full of keys in use.
//
// Keys with waiters, calls in flight or permits held are never evicted;
// when no key can make room, the new key's call fails with ErrTooManyKeys,
// so a flood of unique keys never grows memory past the bound. Each
// eviction examines at most 8 keys per shard, from the least recently used;
// small bounds use fewer shards (one for n < 32).
//
// Whether a key's limiter holds permits until Release is what
// limiters.HoldsPermits says (true for Concurrency and for a Chain with such
// a member): such a key is never forgotten while its limiter is not full,
// since a later Release would otherwise reach a fresh limiter.
//
// A limiter is closed when it is forgotten, and only when no call through the
// repository is using it, so those calls never see a closed limiter (Reset
// and Reconfigure excepted: they fail the key's waiters). A limiter obtained
// with Get, though, may be forgotten and replaced.
//
// # Operating
//
// Both memory repositories implement Admin: Peek reports a key's state
// without spending or creating anything, and Reset gives a key a fresh, full
// limiter. Their limits can change at run time, keeping each key's state:
// Memory.Reconfigure gives every key a new limiters.Spec, and GCRA.SetRate a
// new rate and burst.
package repository
