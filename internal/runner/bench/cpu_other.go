//go:build !unix

package bench

import "time"

// processCPU is unknown here: the self-check then judges schedule lag only.
func processCPU() (time.Duration, bool) { return 0, false }
