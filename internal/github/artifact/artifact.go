// Package artifact is the server's artifact store: files runners upload
// (profile traces) kept under their SHA-256, so a retried upload or the
// same trace twice takes the space once — in a directory (Dir, the
// embedded default) or in the database every replica shares (DB, with
// PostgreSQL). The store's artifacts table (store.Artifacts) says whose
// each file is.
package artifact

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// DefaultMaxBytes caps one uploaded file when the server sets no cap.
const DefaultMaxBytes = 256 << 20

// ErrTooLarge is an upload past the cap.
var ErrTooLarge = errors.New("artifact too large")

// Dir keeps artifacts in a directory.
type Dir struct {
	root string
	max  int64
}

// NewDir opens (and creates) the artifact directory root; max caps one
// file (DefaultMaxBytes when 0).
func NewDir(root string, max int64) (*Dir, error) {
	if root == "" {
		return nil, errors.New("artifact directory: no path")
	}
	if max <= 0 {
		max = DefaultMaxBytes
	}
	if err := os.MkdirAll(filepath.Join(root, "tmp"), 0o750); err != nil {
		return nil, fmt.Errorf("artifact directory %s: %w", root, err)
	}
	return &Dir{root: root, max: max}, nil
}

// MaxBytes is the cap on one file.
func (d *Dir) MaxBytes() int64 { return d.max }

// Root is the directory.
func (d *Dir) Root() string { return d.root }

// Where names the store for logs.
func (d *Dir) Where() string { return d.root }

// Save stores what r holds and returns its SHA-256 and size; past the cap
// it stores nothing and returns an error wrapping ErrTooLarge.
func (d *Dir) Save(r io.Reader) (sum string, size int64, err error) {
	tmp, err := os.CreateTemp(filepath.Join(d.root, "tmp"), "upload-*")
	if err != nil {
		return "", 0, fmt.Errorf("save artifact: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(r, d.max+1))
	if err != nil {
		return "", 0, fmt.Errorf("save artifact: %w", err)
	}
	if n > d.max {
		return "", 0, fmt.Errorf("%w: over the server's cap of %d bytes", ErrTooLarge, d.max)
	}
	if err := tmp.Close(); err != nil {
		return "", 0, fmt.Errorf("save artifact: %w", err)
	}
	sum = hex.EncodeToString(h.Sum(nil))
	final := d.path(sum)
	if err := os.MkdirAll(filepath.Dir(final), 0o750); err != nil {
		return "", 0, fmt.Errorf("save artifact: %w", err)
	}
	if err := os.Rename(tmp.Name(), final); err != nil {
		return "", 0, fmt.Errorf("save artifact: %w", err)
	}
	return sum, n, nil
}

var hexSum = regexp.MustCompile(`^[0-9a-f]{64}$`)

// File is an opened artifact.
type File = io.ReadSeekCloser

// Open opens the artifact with that SHA-256.
func (d *Dir) Open(sum string) (File, error) {
	if !hexSum.MatchString(sum) {
		return nil, fmt.Errorf("artifact %q: not a SHA-256", sum)
	}
	return os.Open(d.path(sum))
}

func (d *Dir) path(sum string) string { return filepath.Join(d.root, sum[:2], sum) }

// SweepStats is what one Sweep removed.
type SweepStats struct {
	Files     int   // stored files no row references
	Bytes     int64 // their size
	Temps     int   // abandoned uploads in tmp/
	TempBytes int64
}

// Sweep removes the stored files whose SHA-256 keep lacks (no row
// references them: their rows were swept, or the row write failed after
// the upload) and the temporary files of uploads abandoned in tmp/, but
// only those last written before cutoff: an upload in progress, or one
// whose row is being written, is younger. Files not named like a SHA-256
// are not the store's and stay. It goes on past a file it cannot remove
// and returns the first such error with what it did remove.
func (d *Dir) Sweep(keep map[string]bool, cutoff time.Time) (SweepStats, error) {
	var (
		st    SweepStats
		first error
	)
	remove := func(path string, info os.FileInfo) bool {
		if !info.Mode().IsRegular() || !info.ModTime().Before(cutoff) {
			return false
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			if first == nil {
				first = fmt.Errorf("sweep artifacts: %w", err)
			}
			return false
		}
		return true
	}
	tops, err := os.ReadDir(d.root)
	if err != nil {
		return st, fmt.Errorf("sweep artifacts %s: %w", d.root, err)
	}
	for _, top := range tops {
		if !top.IsDir() {
			continue
		}
		isTmp := top.Name() == "tmp"
		if !isTmp && !hexPrefix.MatchString(top.Name()) {
			continue
		}
		sub := filepath.Join(d.root, top.Name())
		entries, err := os.ReadDir(sub)
		if err != nil {
			if first == nil {
				first = fmt.Errorf("sweep artifacts %s: %w", sub, err)
			}
			continue
		}
		for _, e := range entries {
			name := e.Name()
			if !isTmp && (!hexSum.MatchString(name) || name[:2] != top.Name() || keep[name]) {
				continue
			}
			info, err := e.Info()
			if err != nil {
				continue // removed meanwhile
			}
			if !remove(filepath.Join(sub, name), info) {
				continue
			}
			if isTmp {
				st.Temps++
				st.TempBytes += info.Size()
			} else {
				st.Files++
				st.Bytes += info.Size()
			}
		}
	}
	return st, first
}

var hexPrefix = regexp.MustCompile(`^[0-9a-f]{2}$`)
