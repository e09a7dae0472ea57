package artifact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/perfgate/perfgate/internal/store"
)

// Blobs is the database's artifact bytes (store.ArtifactBlobs).
type Blobs interface {
	PutArtifactBlob(ctx context.Context, sum string, size int64, r io.Reader) error
	StatArtifactBlob(ctx context.Context, sum string) (store.ArtifactBlob, error)
	ReadArtifactChunk(ctx context.Context, sum string, seq int) ([]byte, error)
	SweepArtifactBlobs(ctx context.Context, before time.Time) (files int, bytes int64, err error)
}

// DB keeps artifacts in the database: with several replicas on one
// PostgreSQL database, a trace uploaded through one is served by all.
// An upload is spooled to a temporary file while its SHA-256 is computed
// and the cap enforced, then stored in one transaction.
type DB struct {
	b       Blobs
	max     int64
	timeout time.Duration
}

// dbTimeout bounds one store call: a 256 MiB upload is 256 chunk writes.
const dbTimeout = 5 * time.Minute

// NewDB keeps artifacts in b; max caps one file (DefaultMaxBytes when 0).
func NewDB(b Blobs, max int64) *DB {
	if max <= 0 {
		max = DefaultMaxBytes
	}
	return &DB{b: b, max: max, timeout: dbTimeout}
}

// MaxBytes is the cap on one file.
func (d *DB) MaxBytes() int64 { return d.max }

// Where names the store for logs.
func (d *DB) Where() string { return "database" }

// Save stores what r holds and returns its SHA-256 and size; past the cap
// it stores nothing and returns an error wrapping ErrTooLarge.
func (d *DB) Save(r io.Reader) (string, int64, error) {
	tmp, err := os.CreateTemp("", "perfgate-upload-*")
	if err != nil {
		return "", 0, fmt.Errorf("save artifact: %w", err)
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(r, d.max+1))
	if err != nil {
		return "", 0, fmt.Errorf("save artifact: %w", err)
	}
	if n > d.max {
		return "", 0, fmt.Errorf("%w: over the server's cap of %d bytes", ErrTooLarge, d.max)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return "", 0, fmt.Errorf("save artifact: %w", err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	defer cancel()
	if err := d.b.PutArtifactBlob(ctx, sum, n, tmp); err != nil {
		return "", 0, fmt.Errorf("save artifact: %w", err)
	}
	return sum, n, nil
}

// Open opens the artifact with that SHA-256; one not stored is an error
// wrapping fs.ErrNotExist. The reader fetches one chunk at a time.
func (d *DB) Open(sum string) (File, error) {
	if !hexSum.MatchString(sum) {
		return nil, fmt.Errorf("artifact %q: not a SHA-256", sum)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	defer cancel()
	b, err := d.b.StatArtifactBlob(ctx, sum)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("artifact %s: %w", sum, fs.ErrNotExist)
	}
	if err != nil {
		return nil, err
	}
	if b.ChunkBytes <= 0 {
		return nil, fmt.Errorf("artifact %s: chunk size %d", sum, b.ChunkBytes)
	}
	return &blobReader{d: d, blob: b, chunk: -1}, nil
}

// Sweep removes the blobs stored before cutoff that no artifact row
// references; the database decides which, so keep is not needed.
func (d *DB) Sweep(_ map[string]bool, cutoff time.Time) (SweepStats, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	defer cancel()
	files, bytes, err := d.b.SweepArtifactBlobs(ctx, cutoff)
	return SweepStats{Files: files, Bytes: bytes}, err
}

// blobReader reads a stored blob as a file: http.ServeContent seeks to
// learn the size and to serve ranges.
type blobReader struct {
	d     *DB
	blob  store.ArtifactBlob
	pos   int64
	chunk int // the chunk in buf; -1: none
	buf   []byte
}

func (r *blobReader) Read(p []byte) (int, error) {
	if r.pos >= r.blob.Size {
		return 0, io.EOF
	}
	cb := int64(r.blob.ChunkBytes)
	seq := int(r.pos / cb)
	if seq != r.chunk {
		ctx, cancel := context.WithTimeout(context.Background(), r.d.timeout)
		data, err := r.d.b.ReadArtifactChunk(ctx, r.blob.SHA256, seq)
		cancel()
		if err != nil {
			return 0, err
		}
		r.chunk, r.buf = seq, data
	}
	off := r.pos - int64(seq)*cb
	if off >= int64(len(r.buf)) {
		return 0, fmt.Errorf("artifact %s: chunk %d is %d bytes, short of offset %d", r.blob.SHA256, seq, len(r.buf), off)
	}
	n := copy(p, r.buf[off:])
	r.pos += int64(n)
	return n, nil
}

func (r *blobReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.pos
	case io.SeekEnd:
		offset += r.blob.Size
	default:
		return 0, fmt.Errorf("seek: whence %d", whence)
	}
	if offset < 0 {
		return 0, errors.New("seek: negative position")
	}
	r.pos = offset
	return offset, nil
}

func (r *blobReader) Close() error { r.buf = nil; return nil }
