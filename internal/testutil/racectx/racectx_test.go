package racectx_test

import (
	"context"
	"testing"

	"github.com/throttlekit/throttle/internal/testutil/racectx"
)

func TestGrantFirst(t *testing.T) {
	granted := make(chan struct{})
	ctx := racectx.GrantFirst(context.Background(), func() { close(granted) })
	if ctx.Err() != nil {
		t.Fatal("ended before Done was called")
	}
	select {
	case <-ctx.Done():
		t.Fatal("the first Done channel must never be ready")
	case <-granted:
	}
	if ctx.Err() != context.Canceled {
		t.Fatalf("Err = %v, want Canceled", ctx.Err())
	}
	<-ctx.Done() // later calls: the real, closed channel
}
