package redisrepo

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle/limiters"
	"github.com/throttlekit/throttle/repository"
)

// Storage returns a function of the shape server.WithStorage takes, which
// keeps a server.Policy's limits in Redis:
//
//	p, err := server.LoadPolicy("policy.yaml", server.WithStorage(redisrepo.Storage(client)))
//
// Each set of limits the policy asks for (a rule's Limits, or its CostCaps)
// becomes a repository of NewChain, deciding all of them in one round trip,
// with opts. Each set has a namespace of its own under the prefix
// (WithPrefix): prefix + "p" + a hash of its specs + "." + how many sets
// with the same specs the policy asked for before it + ":". Replicas that
// load the same policy file therefore share each rule's state, and a rule
// keeps its state when other rules of the file change. Give each policy
// (and each reload of it) its own Storage.
func Storage(client redis.UniversalClient, opts ...Option) func([]limiters.Spec) (repository.Repository, error) {
	cfg := defaults()
	applyOptions(&cfg, opts)
	var mu sync.Mutex
	seen := map[string]int{}
	return func(specs []limiters.Spec) (repository.Repository, error) {
		sum := sha256.Sum256(fmt.Appendf(nil, "%+v", specs))
		h := hex.EncodeToString(sum[:4])
		mu.Lock()
		k := seen[h]
		seen[h]++
		mu.Unlock()
		prefix := cfg.prefix + "p" + h + "." + strconv.Itoa(k) + ":"
		return NewChain(client, specs, append(opts[:len(opts):len(opts)], WithPrefix(prefix))...)
	}
}
