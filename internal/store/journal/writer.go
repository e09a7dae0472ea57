package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// Writer appends records to a segment of its own. One writer at a time
// per directory: each Create starts a new segment, which is how a reader
// knows an older segment's writer is gone.
type Writer struct {
	path string
	num  int64 // the segment's number
	// segLimit overrides SegmentLimit (tests).
	segLimit int64

	mu    sync.Mutex
	f     *os.File
	buf   []byte
	size  int64 // bytes of whole frames written
	dirty bool  // appended since the last Sync
	err   error // a failed write that could not be undone: no more appends

	// syncMu makes a second Sync wait for the fsync under way, so that a
	// Sync returning means everything appended before it is on disk.
	syncMu sync.Mutex
}

// Create opens a new segment in dir, numbered one past the newest there
// (1 in an empty or new dir), for appending.
func Create(dir string) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("journal: create %s: %w", dir, err)
	}
	segs, err := segments(dir)
	if err != nil {
		return nil, err
	}
	n := int64(1)
	if len(segs) > 0 {
		n = segs[len(segs)-1] + 1
	}
	path := filepath.Join(dir, segName(n))
	// O_EXCL: a second writer started at the same moment fails here
	// instead of interleaving with this one.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: create segment: %w", err)
	}
	// The new name must survive a crash too, or a Sync of its records
	// would keep bytes no directory entry reaches.
	if err := syncDir(dir); err != nil {
		_ = f.Close()
		return nil, err
	}
	return &Writer{path: path, num: n, f: f}, nil
}

// Path is the segment file this writer appends to.
func (w *Writer) Path() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.path
}

// Append frames r and writes it with one write(2), so a reader sees either
// none of it or a prefix that is plainly incomplete. It is durable after
// the next Sync.
func (w *Writer) Append(r Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if w.f == nil {
		return errors.New("journal: append to a closed writer")
	}
	var err error
	w.buf, err = appendFrame(w.buf[:0], r)
	if err != nil {
		return err
	}
	n, err := w.f.Write(w.buf)
	if cap(w.buf) > 1<<20 {
		w.buf = nil // keep no large payload's buffer between appends
	}
	if err != nil {
		// A short write would leave a partial frame that later frames
		// follow: cut it off, or refuse to append after it.
		if n > 0 {
			if terr := w.f.Truncate(w.size); terr != nil {
				w.err = fmt.Errorf("journal: %s is damaged at byte %d (%w); start a new writer", w.path, w.size, terr)
			}
		}
		return fmt.Errorf("journal: append %s: %w", r.ID, err)
	}
	w.size += int64(n)
	w.dirty = true
	if w.size >= w.limit() {
		w.roll()
	}
	return nil
}

// SegmentLimit is the size past which a writer moves on to a new
// segment, so the folded ones can be trimmed while the door runs.
const SegmentLimit = 64 << 20

func (w *Writer) limit() int64 {
	if w.segLimit > 0 {
		return w.segLimit
	}
	return SegmentLimit
}

// roll moves the writer to a new segment, numbered one past its own; the
// old one, synced and closed, is whole, as a reader treats every segment
// but the newest. It is called with w.mu held.
func (w *Writer) roll() {
	dir := filepath.Dir(w.path)
	next := filepath.Join(dir, segName(w.num+1))
	// A roll that fails leaves the writer where it was: the record is
	// written, and the next append tries again.
	f, err := os.OpenFile(next, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return
	}
	if w.f.Sync() != nil || syncDir(dir) != nil {
		_ = f.Close()
		_ = os.Remove(next)
		return
	}
	_ = w.f.Close()
	w.f, w.path, w.num, w.size, w.dirty = f, next, w.num+1, 0, false
}

// Sync makes every record appended before it durable: an fsync when
// anything was appended since the last Sync, nothing otherwise.
func (w *Writer) Sync() error {
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	w.mu.Lock()
	f, path, dirty := w.f, w.path, w.dirty
	w.dirty = false
	w.mu.Unlock()
	if !dirty || f == nil {
		return nil
	}
	if err := f.Sync(); err != nil {
		if errors.Is(err, os.ErrClosed) {
			return nil // rolled meanwhile: the roll synced it
		}
		w.mu.Lock()
		w.dirty = true
		w.mu.Unlock()
		return fmt.Errorf("journal: sync %s: %w", path, err)
	}
	return nil
}

// Close syncs and closes the segment. A reader still treats it as the
// one being written until a newer segment exists.
func (w *Writer) Close() error {
	serr := w.Sync()
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return serr
	}
	cerr := w.f.Close()
	w.f = nil
	if serr != nil {
		return serr
	}
	if cerr != nil {
		return fmt.Errorf("journal: close %s: %w", w.path, cerr)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("journal: sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("journal: sync %s: %w", dir, err)
	}
	return nil
}
