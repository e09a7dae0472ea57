//go:build unix

package deploy

import (
	"os"
	"strconv"
	"syscall"
)

// fileGID is the group owning a file (the Docker socket's, for
// --group-add).
func fileGID(fi os.FileInfo) (string, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", false
	}
	return strconv.FormatUint(uint64(st.Gid), 10), true
}
