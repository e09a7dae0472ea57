//go:build !unix

package agent

import "os"

// lockFile does not lock where flock is missing: agents there need --name
// and their own --state-dir.
func lockFile(*os.File) error { return nil }

func unlockFile(*os.File) error { return nil }
