// Package source gets a commit's tree to the runner without the runner
// ever holding a GitHub credential: the server streams GitHub's tarball of
// the exact commit with its installation token (GitHub, in github.go), and
// the agent unpacks it safely (Unpack) into a per-commit work directory
// kept in a size-bounded, least-recently-used on-disk cache (Cache).
//
// A tarball is input from whoever controls the repository: nothing in it
// may write outside the work directory, link out of it, create devices, or
// exhaust the disk. Unpack refuses such archives whole, with an error that
// names the entry.
package source

import (
	"errors"
)

// Limits bound what one tree may hold.
type Limits struct {
	MaxBytes     int64 // total bytes of all files; DefaultMaxBytes when 0
	MaxFiles     int   // entries of any kind; DefaultMaxFiles when 0
	MaxFileBytes int64 // one file; MaxBytes when 0
}

// Defaults of Limits: room for a large monorepo's source, not for model
// weights (those come from the runner's own model directory).
const (
	DefaultMaxBytes = 4 << 30
	DefaultMaxFiles = 200_000
)

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	if l.MaxFileBytes <= 0 || l.MaxFileBytes > l.MaxBytes {
		l.MaxFileBytes = l.MaxBytes
	}
	return l
}

var (
	// ErrRefused wraps every refusal of an archive's content: an unsafe
	// entry, a cap exceeded, a commit other than the one asked for. A
	// retry cannot help.
	ErrRefused = errors.New("source archive refused")
	// ErrNotFound: the repository has no such commit (or the app cannot
	// read it).
	ErrNotFound = errors.New("commit not found")
)
