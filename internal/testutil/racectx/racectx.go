// Package racectx makes a context's cancellation race a grant on purpose,
// for tests of code that waits in a select on a grant and ctx.Done(): the
// race of go.dev/issue/63615, made deterministic instead of hoped for.
package racectx

import (
	"context"
	"sync"
)

// GrantFirst returns a context derived from parent that ends, and then
// runs grant, the first time its Done method is called; that call returns
// a channel that never closes. A waiter that calls Done in its select
// therefore finds its context already ended and only the grant ready: the
// case in which Go's random choice between two ready cases could keep a
// grant for a caller that gave up. Later Done calls return the real,
// closed channel.
func GrantFirst(parent context.Context, grant func()) context.Context {
	ctx, cancel := context.WithCancel(parent)
	return &hooked{Context: ctx, hook: func() { cancel(); grant() }}
}

type hooked struct {
	context.Context
	once sync.Once
	hook func()
}

func (c *hooked) Done() <-chan struct{} {
	first := false
	c.once.Do(func() { c.hook(); first = true })
	if first {
		return make(chan struct{})
	}
	return c.Context.Done()
}
