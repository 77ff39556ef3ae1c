//go:build !unix

package credinject

import "time"

// cpuTime is not measured here.
func cpuTime() time.Duration { return 0 }
