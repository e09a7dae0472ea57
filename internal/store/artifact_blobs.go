package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"time"
)

// ArtifactBlobs keep artifact bytes in the database (migration 0011), so
// every replica on one PostgreSQL database serves what any of them stored
// (artifact.DB). A blob is its SHA-256, its size and its chunks.
type ArtifactBlobs interface {
	// PutArtifactBlob stores size bytes read from r under sum, in chunks
	// of ArtifactChunkBytes, in one transaction. A blob already stored is
	// not read again; its grace before a sweep starts over.
	PutArtifactBlob(ctx context.Context, sum string, size int64, r io.Reader) error
	// StatArtifactBlob returns the blob's size and chunk size; ErrNotFound
	// when it is not stored.
	StatArtifactBlob(ctx context.Context, sum string) (ArtifactBlob, error)
	// ReadArtifactChunk returns chunk seq (from 0) of the blob.
	ReadArtifactChunk(ctx context.Context, sum string, seq int) ([]byte, error)
	// SweepArtifactBlobs deletes the blobs stored before the cutoff that
	// no artifact row references, and says how many and how large.
	SweepArtifactBlobs(ctx context.Context, before time.Time) (files int, bytes int64, err error)
}

// ArtifactChunkBytes is the size of a stored chunk: large enough that a
// 256 MiB trace is 256 rows, small enough that a reader holds little.
const ArtifactChunkBytes = 1 << 20

// ArtifactBlob is a stored blob's shape.
type ArtifactBlob struct {
	SHA256     string
	Size       int64
	ChunkBytes int
}

func (s *sqlStore) PutArtifactBlob(ctx context.Context, sum string, size int64, r io.Reader) error {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := s.nowMicros()
		res, err := tx.ExecContext(ctx, s.q(`UPDATE artifact_blobs SET created_at = ? WHERE sha256 = ?`), now, sum)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err // stored already
		}
		// A replica storing the same bytes at the same time waits here
		// for the other's commit and then stores nothing.
		res, err = tx.ExecContext(ctx, s.q(`INSERT INTO artifact_blobs (sha256, size, chunk_bytes, created_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (sha256) DO NOTHING`), sum, size, ArtifactChunkBytes, now)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		buf := make([]byte, ArtifactChunkBytes)
		var stored int64
		for seq := 0; ; seq++ {
			n, err := io.ReadFull(r, buf)
			if n > 0 {
				if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO artifact_chunks (sha256, seq, data) VALUES (?, ?, ?)`),
					sum, seq, buf[:n]); err != nil {
					return fmt.Errorf("chunk %d: %w", seq, err)
				}
				stored += int64(n)
			}
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("read: %w", err)
			}
		}
		if stored != size {
			return fmt.Errorf("read %d bytes, want %d", stored, size)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store artifact %s: %w", sum, err)
	}
	return nil
}

func (s *sqlStore) StatArtifactBlob(ctx context.Context, sum string) (ArtifactBlob, error) {
	b := ArtifactBlob{SHA256: sum}
	err := s.r.QueryRowContext(ctx, s.q(`SELECT size, chunk_bytes FROM artifact_blobs WHERE sha256 = ?`), sum).Scan(&b.Size, &b.ChunkBytes)
	if err != nil {
		return ArtifactBlob{}, fmt.Errorf("artifact %s: %w", sum, notFound(err))
	}
	return b, nil
}

func (s *sqlStore) ReadArtifactChunk(ctx context.Context, sum string, seq int) ([]byte, error) {
	var data []byte
	err := s.r.QueryRowContext(ctx, s.q(`SELECT data FROM artifact_chunks WHERE sha256 = ? AND seq = ?`), sum, seq).Scan(&data)
	if err != nil {
		return nil, fmt.Errorf("artifact %s chunk %d: %w", sum, seq, notFound(err))
	}
	return data, nil
}

func (s *sqlStore) SweepArtifactBlobs(ctx context.Context, before time.Time) (int, int64, error) {
	var (
		files int
		bytes int64
	)
	err := s.tx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, s.q(`DELETE FROM artifact_blobs WHERE created_at < ?
				AND NOT EXISTS (SELECT 1 FROM artifacts a WHERE a.sha256 = artifact_blobs.sha256)
			RETURNING sha256, size`), before.UnixMicro())
		if err != nil {
			return err
		}
		var sums []string
		for rows.Next() {
			var (
				sum  string
				size int64
			)
			if err := rows.Scan(&sum, &size); err != nil {
				rows.Close()
				return err
			}
			sums, files, bytes = append(sums, sum), files+1, bytes+size
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		// PostgreSQL's foreign key cascades; SQLite's too when enforced,
		// but say it for any connection that does not.
		for _, sum := range sums {
			if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM artifact_chunks WHERE sha256 = ?`), sum); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("sweep artifact blobs: %w", err)
	}
	return files, bytes, nil
}
