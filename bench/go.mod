module github.com/throttlekit/throttle/bench

go 1.25.0

replace github.com/throttlekit/throttle => ..

require (
	github.com/throttlekit/throttle v0.0.0-00010101000000-000000000000
	go.uber.org/ratelimit v0.3.1
	golang.org/x/sync v0.22.0
	golang.org/x/time v0.15.0
)

require github.com/benbjohnson/clock v1.3.0 // indirect
