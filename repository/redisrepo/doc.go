// Package redisrepo keeps limits in Redis, so that every replica of a
// service shares them: twenty workers behind one API key admit the limit
// once between them, not twenty times. It implements repository.Repository
// and repository.Admin with github.com/redis/go-redis/v9, so a single node,
// Sentinel (a failover client) and Cluster all work; it is the only package
// of this module that imports go-redis.
//
//	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
//	repo, err := redisrepo.New(client, limiters.Spec{Algorithm: "gcra", Limit: 20, Rate: limiters.PerSecond(10)})
//	...
//	defer repo.Close()
//	d, err := repo.TryAcquire(ctx, userID, 1)
//
// # Model
//
// Each algorithm of package limiters (token bucket, GCRA, leaky bucket,
// fixed window, sliding window, sliding log, concurrency) is a Lua script
// that decides atomically in one round trip (EVALSHA; the script is loaded
// again after NOSCRIPT). Time comes from Redis's TIME inside the script, so
// replicas whose clocks disagree still agree. Arithmetic is in integer
// microseconds (Redis's clock resolution), with rates kept as exact
// fractions as package limiters keeps them, so nothing drifts; the
// Decisions are those the local limiter of the same Spec would return,
// durations rounded up to the microsecond. A window must therefore be a
// whole number of microseconds (a rate's period need not be). Lua's
// numbers are doubles, exact below 2^53: the window algorithms keep the
// sliding window's products of a count and a duration in two limbs, so
// every window spec up to a limit of 2^31−1 over about 50 days (1,000,000
// an hour, 100,000 a day, 10^9 over 31 days) decides exactly as the local
// limiter (TestDifferentialLarge). The bucket algorithms (gcra,
// token_bucket, leaky_bucket) take every burst and rate the local limiters
// take: a burst that would take more than 2^60 ns (about 36 years) to
// refill saturates there, as the local limiter's does (10^9 at one per 31
// days holds 430), and a decision is exact when the burst times the
// interval's numerator and its denominator (the interval as a fraction of
// a microsecond in lowest terms) stay below 2^51 — every rate that divides
// its period into whole microseconds, or fractions with a small
// denominator (1,000,000 an hour, 100,000 a day, 7 a second) at any burst.
// Otherwise the interval is rounded up to the finest fraction of a
// microsecond that keeps them there (see newBucket): never a faster rate,
// slower by less than one part in 2^49/burst for rates up to 10^6 per
// second (999,999 a day with a burst of 10^6: about one part in 10^10), and the
// decisions are exactly those of the local limiter of that rounded rate.
// Only a burst beyond 2^51 at a rate above 10^6 per second is refused.
//
// NewChain decides several limits of one key (10/s and 1000/day and 5 in
// flight) all or nothing in the same round trip.
//
// # Policies
//
// A server.Policy keeps its limits in memory unless told otherwise; Storage
// puts them in Redis, each rule's limits (and its cost caps) decided in one
// round trip by a NewChain repository, under a namespace of its own:
//
//	p, err := server.LoadPolicy("policy.yaml")                                               // memory
//	p, err = server.LoadPolicy("policy.yaml", server.WithStorage(redisrepo.Storage(client))) // or Redis
//
// Either way the middleware answers alike: the same headers, the same 429s
// and problem+json bodies, and server.ChargeCost charges cost caps after the
// response.
//
// Acquire is fair across replicas for the bucket algorithms: the script
// reserves the earliest slot in Redis, and the caller sleeps until it, so
// waiters are served in reservation order whichever replica they are on. A
// slot past ctx's deadline is refused at once with *limiters.RejectedError.
// A caller that gives up cancels its reservation: given back while it is the
// latest on the key, otherwise left to expire. A spec's QueueLimit bounds
// the permits reserved ahead (the leaky bucket's default is its capacity;
// the others are unlimited by default): beyond it Acquire returns
// limiters.ErrQueueFull at once. The window algorithms and concurrency
// limits retry instead (see Repository.Acquire).
//
// Concurrency permits are leases: members of a sorted set scored by their
// expiry, renewed by one goroutine per Repository while held, so the permits
// of a crashed replica come back by themselves after the lease (WithPermitLease,
// 10s by default). Release gives back this repository's own leases.
//
// Calls from one process that arrive while a round trip is in flight go
// together in the next round trip (at most WithBatch calls), sent by one
// goroutine per Repository: no goroutine per call, and no added latency when
// the connection is idle. The batch is one script call that decides every
// call in it in order, with one TIME (on a Cluster, one per hash tag, in
// one pipeline); TryAcquireMany sends a slice of tries and peeks that way in
// a round trip of its own. Tries and peeks of a lone GCRA limit whose interval is a
// whole number of microseconds, or of a lone sliding window, take a
// shorter script that writes the state only when a grant changes it.
//
// # Deadlines, whatever the client's settings
//
// Every round trip ends at its caller's deadline or after WithTimeout,
// whichever comes first, and a late answer is a failure (ErrUnavailable,
// "timeout"): calls, lease renewals and the FeedbackStore's calls alike.
// go-redis bounds a socket read by the context's deadline only with
// ContextTimeoutEnabled: true; with its defaults (as
// redis.NewClient(&redis.Options{Addr: …}) builds it) a read waits out
// ReadTimeout (3s) and retries, whatever the context says. So when the
// client does not honour contexts, the repository makes a client of its
// own from the client's options (the same addresses, credentials, TLS and
// dialer — a failover client's follows its sentinels — and a pool of its
// own) with ContextTimeoutEnabled set; hooks added to your client do not
// see its commands. We recommend ContextTimeoutEnabled: true on the client
// you pass: the repository then uses it as it is (its hooks see every
// command, and no second pool is opened). A call that finds nothing in
// flight makes its round trip on its own goroutine (no hand-off to the
// sender, whatever its ctx); a cancellation without a deadline is noticed
// when that round trip ends, at most WithTimeout later. Calls that arrive
// while a round trip is in flight wait for the sender, and return the
// moment their ctx is done. The deadline is kept on the socket; what the
// client waits for on a context's Done instead (a connection from a full
// pool, a retry's back-off) ends at most WithTimeout/16 past it: the round
// trips begun within each sixteenth of the timeout share one timer, rather
// than each arming its own (bench/README.md measures what that saves).
//
// # Lease mode
//
// For a quota too hot for a round trip per decision, WithLeases(refresh)
// moves the decisions into each process: per key, a process leases a share
// of the spec's rate (and the same fraction of its burst) from Redis and
// decides locally, at memory speed and without allocating, with a limiter
// of that share. One goroutine per Repository renews every lease each
// refresh in one pipeline, asking for twice the demand it saw; Redis grants
// max-min fair shares of those demands, plus an equal part of the rate no
// demand takes, never more in all than the rate (a process's share grows
// only from what the others' grants leave free, and shrinks when it
// renews). A lease lives three refreshes: the share of a process that died
// or lost Redis goes back to the others when it expires, and Close gives
// the shares back at once. A key idle for three refreshes gives its share
// back and is forgotten. The spec must be one gcra or token_bucket.
//
// The cost is exactness. Per-request scripts admit at most rate × T + burst
// in any interval T. In lease mode the shares never sum past the rate and
// their bursts past burst + one permit per process (each rounds up), and a
// new share starts empty, so the processes together admit at most rate × T
// + burst + processes, plus, when a share moves, what the process giving it
// up admits during the one round trip before it learns of it. A process
// that dies takes nothing with it: its share stays reserved (the others get
// less, not more) until its lease expires. A new share starts empty, so a
// key's first permits in a process come after one interval of its share;
// a process alone gets the whole rate. A rate is shared in at least 1024
// parts (a small one counted over a longer period). Decisions
// describe the process's share (Limit is its burst); a call may take at
// most that burst, and Acquire retries when the share allows or changes,
// not in FIFO order across processes. A lease ends on our clock a lease's
// life (three refreshes) after its last answered renewal was sent — never
// later than Redis ends it — whether or not a renewal is in flight: from
// then on the process has no share (its calls are refused with RetryAfter
// the refresh) until a renewal answers, and once a renewal has failed, the
// fail mode decides. A renewer starved of CPU for longer than a lease's
// life loses its share for that long; refresh intervals of 100ms or more
// leave room for that.
// TestLeasesBound, TestLeasesFair and TestLeasesExpiry check these bounds,
// and BenchmarkRedis (bench/) measures the speed.
//
// # Keys and TTLs
//
// Key k with prefix p (WithPrefix, default "throttle:") is stored under
// p{k}:<i><algorithm>, where the hash tag {k} puts every key of one decision
// in the same Cluster slot. A key of 1 to 64 bytes of printable ASCII other
// than '{' and '}', not starting with '#', is used verbatim; any other key —
// empty, longer, binary, with spaces or braces — becomes '#' and its hex
// SHA-256, so a hostile key costs at most 65 bytes and never collides with
// a verbatim one. Every key is written with a TTL no longer than its state
// matters: until the bucket is full again, the window (two for the sliding
// window) ends, the last grant leaves the log, or the last lease expires; a
// state equal to a full limiter is deleted rather than written.
//
// Lease mode keeps one hash per key, p{k}:L, with a field per lease,
// "grant:want:expiry", and a TTL until its last lease expires.
//
// The sliding log keeps one sorted-set entry per grant, so its memory is
// O(limit) per key, and New refuses limits above 100,000; a call costs
// O(log entries) plus the entries that expire, plus n entries when it is
// refused. Use sliding_window (two counters whatever the limit) for larger
// limits.
//
// # When Redis is not well
//
// Each round trip is bounded by WithTimeout (and each call by its ctx); a
// circuit breaker (github.com/sony/gobreaker/v2, WithBreaker) opens after
// consecutive failures and lets a trial through after a cool-down. Then
// WithFailMode decides: FailClosed (the default) returns an error wrapping
// ErrUnavailable; FailOpen admits; FailLocal decides with a local limiter of
// the same spec divided by WithReplicas. WithObserver hears of each, and of
// every breaker state change; BreakerState reports it. Service resumes by
// itself when Redis answers again. The breaker counts what callers
// experienced: a round trip that failed or ended at its deadline is a
// failure; one whose caller cancelled it counts as neither. The errors
// say what happened — "redisrepo: redis unavailable: connection refused:
// …", "timeout: no reply within 1s", "connection reset", "authentication
// failed", "script error", "circuit breaker open" — and wrap both
// ErrUnavailable and the cause. TestToxiproxy holds all of this, and the
// FeedbackStore, to account through a real Toxiproxy: latency with
// jitter, a black hole, reset connections, replies sliced and throttled,
// Redis down and unreachable at start. A value someone else wrote at one of our
// keys is an error wrapping ErrForeignValue, never an admit.
//
// # What a fleet of Transports learns
//
// NewFeedbackStore is a throttle.FeedbackStore: Transports of several
// processes, each with its own client, share the pauses they learn (Pub/Sub
// on the channel prefix+"feedback"), elect one prober after each pause (a
// lease key per partition, SET PX) and claim a window quota the server
// reports before each request (a hash per partition, one script per claim
// and per answer, time from TIME). Claims are fair between the processes
// sharing a quota: when room is scarce they go round (three processes
// sharing one quota finish within 20% of each other). The pauses in force
// are kept in a sorted set (prefix+"pauses"), so a Transport that joins
// during a pause (a new replica) honours it. Every call ends within the
// store's WithTimeout (1s). Its keys are hash-tagged on the partition
// and expire 15 minutes after their last write.
//
// # Cluster
//
// A Cluster needs nothing more than a *redis.ClusterClient: every key of a
// decision shares its hash tag. Scripts are loaded on each master on first
// use. While a master is down, keys in its slots are unavailable (the fail
// mode decides for them) and the others keep working.
//
// # Sentinel
//
// A failover client (redis.NewFailoverClient, or redis.NewUniversalClient
// with a MasterName) needs nothing more either. When the master fails,
// calls fail as the fail mode says until the sentinels promote a replica
// and the client follows it; then decisions resume by themselves on the
// promoted replica, which holds the state the master replicated to it.
// Replication is asynchronous: grants the master made just before it failed
// may not have reached the replica (nor, when a live master is handed over,
// grants a client made on it before it heard of the switch), and the
// replica then grants those permits again.
// The tests run each fail mode through a failover against real sentinels,
// the master killed or handed over by SENTINEL FAILOVER, and check that
// decisions resume on the promoted replica with the state replicated to it.
package redisrepo
