package source_test

import (
	"syscall"
	"testing"
)

// unmaskAll sets a umask that would strip every permission bit, so tests
// show the tree's modes do not depend on the agent's umask.
func unmaskAll(t *testing.T) func() {
	t.Helper()
	old := syscall.Umask(0o077)
	return func() { syscall.Umask(old) }
}
