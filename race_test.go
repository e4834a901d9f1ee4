//go:build race

package throttle

// raceEnabled: the race detector is on (sync.Pool then drops a part of
// what is put back, on purpose, so pooled paths allocate now and then).
const raceEnabled = true
