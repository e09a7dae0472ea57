package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/perfgate/perfgate/internal/vocab/jobstate"
)

const resultCols = `id, job_id, attempt, idempotency_key, run_index, kind, side, pair, gpu_uuid, summary, environment, samples, created_at`

func scanResult(sc scanner) (Result, error) {
	var (
		r            Result
		kind         string
		summary, env string
		created      sql.NullInt64
	)
	if err := sc.Scan(&r.ID, &r.JobID, &r.Attempt, &r.IdempotencyKey, &r.RunIndex, &kind, &r.Side, &r.Pair, &r.GPUUUID,
		&summary, &env, &r.Samples, &created); err != nil {
		return Result{}, err
	}
	r.Kind = jobstate.ResultKind(kind)
	r.Summary = parseDoc(summary)
	r.Environment = parseDoc(env)
	r.CreatedAt = fromMicros(created)
	return r, nil
}

// currentLease returns the attempt number of a running job held by leaseID,
// or ErrLeaseLost. On PostgreSQL it locks the job row (FOR UPDATE) so a
// reaper cannot take the lease between this check and the caller's write.
func (s *sqlStore) currentLease(ctx context.Context, tx *sql.Tx, jobID int64, leaseID string) (attempt int, logBytes int64, err error) {
	if leaseID == "" {
		return 0, 0, ErrLeaseLost
	}
	lock := ""
	if s.d.dollar {
		lock = " FOR UPDATE"
	}
	err = tx.QueryRowContext(ctx, s.q(`SELECT attempts, log_bytes FROM jobs
		WHERE id = ? AND lease_id = ? AND status = 'running'`+lock), jobID, leaseID).Scan(&attempt, &logBytes)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, ErrLeaseLost
	}
	return attempt, logBytes, err
}

// PutResult stores one run's result under the job's current lease. The
// idempotency key is scoped to the lease: a retry of an upload that already
// landed returns the stored row with created=false (even if the lease has
// since ended, since that upload was made while it was current), and a new
// attempt cannot collide with a lost one's keys. A second result for a run
// (same attempt, kind and run index) under another key is refused with
// ErrRunStored: it would be an extra run of evidence.
func (s *sqlStore) PutResult(ctx context.Context, up ResultUpload) (Result, bool, error) {
	if up.IdempotencyKey == "" {
		return Result{}, false, fmt.Errorf("put result for job %d: idempotency key is required", up.JobID)
	}
	if up.LeaseID == "" {
		return Result{}, false, ErrLeaseLost
	}
	summary, err := jsonDoc(up.Summary)
	if err != nil {
		return Result{}, false, fmt.Errorf("put result for job %d: summary: %w", up.JobID, err)
	}
	env, err := jsonDoc(up.Environment)
	if err != nil {
		return Result{}, false, fmt.Errorf("put result for job %d: environment: %w", up.JobID, err)
	}
	var (
		res     Result
		created bool
	)
	err = s.tx(ctx, func(tx *sql.Tx) error {
		existing, err := scanResult(tx.QueryRowContext(ctx, s.q(`SELECT `+resultCols+` FROM results
			WHERE job_id = ? AND lease_id = ? AND idempotency_key = ?`), up.JobID, up.LeaseID, up.IdempotencyKey))
		if err == nil {
			res = existing
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		attempt, _, err := s.currentLease(ctx, tx, up.JobID, up.LeaseID)
		if err != nil {
			return err
		}
		// The lease check locked the job row (PostgreSQL) or holds the one
		// writer (SQLite): no other upload of this run can slip in between.
		var taken int64
		err = tx.QueryRowContext(ctx, s.q(`SELECT id FROM results
			WHERE job_id = ? AND attempt = ? AND kind = ? AND run_index = ?`),
			up.JobID, attempt, string(up.Kind), up.RunIndex).Scan(&taken)
		if err == nil {
			return fmt.Errorf("%w (result %d holds %s run %d of attempt %d)", ErrRunStored, taken, up.Kind, up.RunIndex, attempt)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		// A concurrent duplicate may have landed while we waited for the
		// row lock; DO NOTHING leaves its row, which we then return.
		res, err = scanResult(tx.QueryRowContext(ctx, s.q(`INSERT INTO results
			(job_id, attempt, lease_id, idempotency_key, run_index, kind, side, pair, gpu_uuid, summary, environment, samples, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (job_id, lease_id, idempotency_key) DO NOTHING
			RETURNING `+resultCols),
			up.JobID, attempt, up.LeaseID, up.IdempotencyKey, up.RunIndex, string(up.Kind), up.Side, up.Pair, up.GPUUUID,
			summary, env, blob(up.Samples), s.nowMicros()))
		if errors.Is(err, sql.ErrNoRows) {
			res, err = scanResult(tx.QueryRowContext(ctx, s.q(`SELECT `+resultCols+` FROM results
				WHERE job_id = ? AND lease_id = ? AND idempotency_key = ?`), up.JobID, up.LeaseID, up.IdempotencyKey))
			return err
		}
		created = err == nil
		return err
	})
	if errors.Is(err, ErrLeaseLost) {
		return Result{}, false, ErrLeaseLost
	}
	if errors.Is(err, ErrRunStored) {
		return Result{}, false, fmt.Errorf("put result %q for job %d: %w", up.IdempotencyKey, up.JobID, err)
	}
	if err != nil {
		return Result{}, false, fmt.Errorf("put result %q for job %d: %w", up.IdempotencyKey, up.JobID, err)
	}
	return res, created, nil
}

// ListResults returns the results of the job's latest attempt — the one
// that finished it — warm-ups first, then by run index.
func (s *sqlStore) ListResults(ctx context.Context, jobID int64) ([]Result, error) {
	rows, err := s.r.QueryContext(ctx, s.q(`SELECT `+resultCols+` FROM results
		WHERE job_id = ? AND attempt = (SELECT attempts FROM jobs WHERE id = ?)
		ORDER BY CASE kind WHEN 'warmup' THEN 0 ELSE 1 END, run_index, id`), jobID, jobID)
	if err != nil {
		return nil, fmt.Errorf("list results of job %d: %w", jobID, err)
	}
	defer rows.Close()
	var out []Result
	for rows.Next() {
		r, err := scanResult(rows)
		if err != nil {
			return nil, fmt.Errorf("list results of job %d: %w", jobID, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list results of job %d: %w", jobID, err)
	}
	return out, nil
}

// CountMeasuredRuns counts the measured runs stored for the job's current
// attempt (a job finishing succeeded must have all its plan's runs).
func (s *sqlStore) CountMeasuredRuns(ctx context.Context, jobID int64) (int, error) {
	var n int
	err := s.r.QueryRowContext(ctx, s.q(`SELECT COUNT(DISTINCT run_index) FROM results
		WHERE job_id = ? AND kind = 'measured' AND attempt = (SELECT attempts FROM jobs WHERE id = ?)`), jobID, jobID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count runs of job %d: %w", jobID, err)
	}
	return n, nil
}

// AppendLog appends chunk at offset to the current attempt's log and
// returns the new length. offset must equal the stored length; otherwise
// ErrOffsetMismatch carries the length so the agent can rewind (a retried
// chunk that already landed shows up as Have past its offset).
func (s *sqlStore) AppendLog(ctx context.Context, jobID int64, leaseID string, offset int64, chunk []byte) (int64, error) {
	var length int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		attempt, have, err := s.currentLease(ctx, tx, jobID, leaseID)
		if err != nil {
			return err
		}
		if offset != have {
			return ErrOffsetMismatch{Have: have}
		}
		length = have + int64(len(chunk))
		if len(chunk) == 0 {
			return nil
		}
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO job_logs (job_id, attempt, byte_offset, data) VALUES (?, ?, ?, ?)`),
			jobID, attempt, offset, chunk); err != nil {
			return fmt.Errorf("insert chunk: %w", err)
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE jobs SET log_bytes = ? WHERE id = ?`), length, jobID); err != nil {
			return fmt.Errorf("update log length: %w", err)
		}
		return nil
	})
	var om ErrOffsetMismatch
	switch {
	case err == nil:
		return length, nil
	case errors.Is(err, ErrLeaseLost):
		return 0, ErrLeaseLost
	case errors.As(err, &om):
		return om.Have, om
	default:
		return 0, fmt.Errorf("append log of job %d at %d: %w", jobID, offset, err)
	}
}

// ReadLog returns one attempt's log; attempt 0 means the latest attempt.
func (s *sqlStore) ReadLog(ctx context.Context, jobID int64, attempt int) ([]byte, error) {
	if attempt <= 0 {
		j, err := s.GetJob(ctx, jobID)
		if err != nil {
			return nil, fmt.Errorf("read log: %w", err)
		}
		attempt = j.Attempts
	}
	rows, err := s.r.QueryContext(ctx, s.q(`SELECT data FROM job_logs WHERE job_id = ? AND attempt = ? ORDER BY byte_offset`),
		jobID, attempt)
	if err != nil {
		return nil, fmt.Errorf("read log of job %d attempt %d: %w", jobID, attempt, err)
	}
	defer rows.Close()
	var out []byte
	for rows.Next() {
		var chunk []byte
		if err := rows.Scan(&chunk); err != nil {
			return nil, fmt.Errorf("read log of job %d attempt %d: %w", jobID, attempt, err)
		}
		out = append(out, chunk...)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read log of job %d attempt %d: %w", jobID, attempt, err)
	}
	return out, nil
}
