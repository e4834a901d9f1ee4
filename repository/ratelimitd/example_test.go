package ratelimitd_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/throttlekit/throttle/internal/service"
	"github.com/throttlekit/throttle/repository/ratelimitd"
)

// A client of a ratelimitd service (here one started in-process) used as a
// repository: each TryAcquire is a check.
func Example() {
	dir, _ := os.MkdirTemp("", "ratelimitd")
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "policy.yaml")
	_ = os.WriteFile(file, []byte("plans: {free: {default: {limits: [{algorithm: fixed_window, limit: 2, window: 1h}]}}}\n"), 0o600)
	svc, _ := service.New(service.Config{PolicyFile: file, Logger: slog.New(slog.DiscardHandler)})
	defer svc.Close()
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()

	c, err := ratelimitd.New(srv.URL, ratelimitd.WithEndpoint("GET /api/items"))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	for range 3 {
		d, err := c.TryAcquire(context.Background(), "alice", 1)
		fmt.Println(d.Allowed, d.Remaining, err)
	}
	// Output:
	// true 1 <nil>
	// true 0 <nil>
	// false 0 <nil>
}
