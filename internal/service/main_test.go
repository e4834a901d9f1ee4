package service

import (
	"context"
	"log/slog"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// quiet drops go-redis's log lines: TestReadyzWithRedisDown makes it log
// every failed dial.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	goleak.VerifyTestMain(m)
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
