package repository

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShardTable drives one shard's hash table with few distinct hashes, so
// that probe runs are long, collide and wrap around, against a map.
func TestShardTable(t *testing.T) {
	for _, hashes := range []uint32{1, 3, 16, 1 << 30} {
		t.Run(strconv.Itoa(int(hashes)), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(hashes)))
			var s shard
			want := map[string]*entry{}
			hashOf := func(k string) uint32 {
				n, _ := strconv.Atoi(k)
				return uint32(n*2654435761) % hashes
			}
			for i := range 20_000 {
				k := strconv.Itoa(rng.IntN(300))
				h := hashOf(k)
				switch e := s.find(uint64(h), k); {
				case e == nil && rng.IntN(3) > 0:
					require.Nil(t, want[k], "op %d: %s lost", i, k)
					e = &entry{key: k, hash: h}
					s.add(e)
					want[k] = e
				case e != nil && rng.IntN(2) == 0:
					require.Same(t, want[k], e, "op %d", i)
					s.remove(e)
					delete(want, k)
				case e != nil:
					require.Same(t, want[k], e, "op %d", i)
					s.moveToFront(e)
				}
				if i%500 == 0 {
					checkShard(t, &s, want, hashOf)
				}
			}
			checkShard(t, &s, want, hashOf)
			for _, e := range want {
				s.remove(e)
			}
			assert.Equal(t, 0, s.n)
			assert.Nil(t, s.head)
			assert.Nil(t, s.tail)
			assert.LessOrEqual(t, len(s.slots), 8, "the table shrinks")
		})
	}
}

func checkShard(t *testing.T, s *shard, want map[string]*entry, hashOf func(string) uint32) {
	t.Helper()
	require.Equal(t, len(want), s.n)
	for k, e := range want {
		require.Same(t, e, s.find(uint64(hashOf(k)), k), "key %s", k)
	}
	n := 0
	var prev *entry
	for e := s.head; e != nil; e = e.next {
		require.Same(t, prev, e.prev)
		prev = e
		n++
	}
	require.Same(t, prev, s.tail)
	require.Equal(t, len(want), n, "LRU list length")
	require.LessOrEqual(t, 4*s.n, 3*len(s.slots), "load ≤ 3/4")
}

// TestShardGrowsWithoutStall: growing moves the old table's entries a few
// slots at each insert, and the move is over before the table must grow
// again; lookups find every key meanwhile.
func TestShardGrowsWithoutStall(t *testing.T) {
	var s shard
	var es []*entry
	grew := 0
	for i := range 100_000 {
		if (s.n+1)*4 > len(s.slots)*3 {
			require.Nil(t, s.old, "insert %d: a move still under way when the table must grow", i)
			grew++
		}
		k := strconv.Itoa(i)
		e := &entry{key: k, hash: uint32(i * 2654435761)}
		s.add(e)
		es = append(es, e)
		if s.old != nil {
			require.LessOrEqual(t, s.moved, migrateStep*(i+1), "insert %d", i)
		}
		if i%997 == 0 {
			for _, e := range es[max(len(es)-3000, 0):] {
				if e != nil {
					require.Same(t, e, s.find(uint64(e.hash), e.key))
				}
			}
		}
		if i%3 == 0 && i > 0 { // removals move entries too
			x := es[i/3]
			require.Same(t, x, s.find(uint64(x.hash), x.key))
			s.remove(x)
			es[i/3] = nil
			require.Nil(t, s.find(uint64(x.hash), x.key))
		}
	}
	assert.Greater(t, grew, 10)
}
