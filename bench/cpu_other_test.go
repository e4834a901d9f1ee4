//go:build !unix

package bench

import "time"

// cpuTime is not measured on this platform; cpu-ns/op is then not reported.
func cpuTime() (time.Duration, bool) { return 0, false }
