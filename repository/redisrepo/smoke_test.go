package redisrepo

import (
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/redistest"
)

func TestSmoke(t *testing.T) {
	s := redistest.Start(t)
	c := newClient(t, s)
	for alg, spec := range specs(3, time.Hour) {
		t.Run(alg, func(t *testing.T) {
			r := newRepo(t, c, spec)
			for i := range 5 {
				d, err := r.TryAcquire(ctxT(t), "k", 1)
				t.Logf("%d %+v %v", i, d, err)
			}
			d, err := r.Peek(ctxT(t), "k")
			t.Logf("peek %+v %v", d, err)
		})
	}
}
