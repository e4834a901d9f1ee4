// Package ratelimitd is the Go client of the ratelimitd service
// (cmd/ratelimitd), and the service's wire format (Check, Result,
// BatchRequest, BatchResponse, Problem).
//
// A Client is a repository.Repository, so a Transport or a server
// middleware can keep its limits in the service:
//
//	c, err := ratelimitd.New("http://127.0.0.1:8090", ratelimitd.WithEndpoint("POST /api/ask"))
//	...
//	defer c.Close()
//	rl := server.New(c, server.WithKey(keyextract.Header("X-API-Key")))
//
// TryAcquire is one check (n == 0 a peek); Acquire checks until granted,
// waiting each refusal's retry_after; Peek and Reset are the service's
// state endpoints (Reset needs WithAdminToken). Concurrent checks are sent
// together in batches (see Client); Check and CheckBatch speak the wire
// format directly.
package ratelimitd
