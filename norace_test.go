//go:build !race

package throttle

// raceEnabled: the race detector is on.
const raceEnabled = false
