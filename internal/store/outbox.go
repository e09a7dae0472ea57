package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"
)

// EffectKind names a GitHub write in the outbox.
type EffectKind string

// Outbox effect kinds.
const (
	// EffectCheckSync sends a check run row's desired state (Body is
	// CheckSyncBody). Its key is the row's; every change re-arms it.
	EffectCheckSync EffectKind = "check_sync"
	// EffectCheckCancel concludes a GitHub check run that no row reports
	// to any more (a replaced run) as cancelled (Body is CheckCancelBody).
	EffectCheckCancel EffectKind = "check_cancel"
	// EffectComment posts an issue comment (Body is CommentBody).
	EffectComment EffectKind = "comment"
	// EffectReaction adds a reaction to an issue comment (Body is
	// ReactionBody).
	EffectReaction EffectKind = "reaction"
)

// EffectStatus is an outbox row's state.
type EffectStatus string

// Outbox states: pending until GitHub confirms (done) or refuses for good
// (failed: a 4xx that retrying cannot fix).
const (
	EffectPending EffectStatus = "pending"
	EffectDone    EffectStatus = "done"
	EffectFailed  EffectStatus = "failed"
)

// Effect is one GitHub write waiting in, or done by, the outbox.
type Effect struct {
	ID int64
	// Key identifies the write: putting an effect whose key exists does
	// nothing, so a retried webhook or a replica racing on the same
	// transition writes once.
	Key            string
	Kind           EffectKind
	InstallationID int64
	Repo           string // owner/name
	Body           json.RawMessage
	Status         EffectStatus
	Version        int
	Attempts       int
	NextAttemptAt  time.Time
	LeaseID        string
	LastError      string
	CreatedAt      time.Time
	DoneAt         time.Time
	// Priority orders due writes (EffectPriorityVerdict first); it is
	// set by the store, not by PutEffect's caller.
	Priority int
}

// CheckSyncBody points a check_sync effect at its row.
type CheckSyncBody struct {
	CheckRunID int64 `json:"check_run_id"`
}

// CheckCancelBody concludes one GitHub check run as cancelled.
type CheckCancelBody struct {
	// GitHubID is the run; 0 when its creation was attempted but its ID
	// never recorded: the outbox then looks it up by HeadSHA, Name and
	// ExternalID, and there is nothing to do when it does not exist.
	GitHubID   int64  `json:"github_id"`
	HeadSHA    string `json:"head_sha,omitempty"`
	ExternalID string `json:"external_id,omitempty"`
	Name       string `json:"name"`
	Title      string `json:"title"`
	Summary    string `json:"summary"`
}

// CommentBody is an issue (pull request) comment.
type CommentBody struct {
	Number int    `json:"number"`
	Body   string `json:"body"`
	// IfOpen: the comment pings the PR's author (a warning, an
	// escalation); the outbox drops it when GitHub says the PR is closed
	// by the time it is sent.
	IfOpen bool `json:"if_open,omitempty"`
}

// ReactionBody is a reaction to an issue comment.
type ReactionBody struct {
	CommentID int64  `json:"comment_id"`
	Content   string `json:"content"`
}

// EffectFilter selects outbox rows for ListEffects; zero fields match all.
type EffectFilter struct {
	Kind   EffectKind
	Status EffectStatus
	Repo   string
}

const effectCols = `id, key, kind, installation_id, repo, body, status, version, attempts, next_attempt_at,
	lease_id, last_error, created_at, done_at, priority`

func scanEffect(sc scanner) (Effect, error) {
	var (
		e                    Effect
		kind, status, body   string
		next, created, doneT sql.NullInt64
	)
	if err := sc.Scan(&e.ID, &e.Key, &kind, &e.InstallationID, &e.Repo, &body, &status, &e.Version, &e.Attempts,
		&next, &e.LeaseID, &e.LastError, &created, &doneT, &e.Priority); err != nil {
		return Effect{}, err
	}
	e.Kind, e.Status = EffectKind(kind), EffectStatus(status)
	e.Body = parseDoc(body)
	e.NextAttemptAt = fromMicros(next)
	e.CreatedAt = fromMicros(created)
	e.DoneAt = fromMicros(doneT)
	return e, nil
}

// CheckSyncKey is the outbox key of a check run row's sync.
func CheckSyncKey(checkRunID int64) string { return "check:" + strconv.FormatInt(checkRunID, 10) }

// PutEffect adds a GitHub write to the outbox unless one with its key
// exists, and reports whether it added it.
func (s *sqlStore) PutEffect(ctx context.Context, e Effect) (bool, error) {
	var created bool
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		created, err = s.putEffect(ctx, tx, e, s.nowMicros())
		return err
	})
	return created, err
}

// txer is what the outbox helpers need of a transaction.
type txer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (s *sqlStore) putEffect(ctx context.Context, tx txer, e Effect, now int64) (bool, error) {
	if e.Key == "" || e.Kind == "" {
		return false, fmt.Errorf("put effect: key and kind are required")
	}
	body, err := jsonDoc(e.Body)
	if err != nil {
		return false, fmt.Errorf("put effect %s: body: %w", e.Key, err)
	}
	res, err := tx.ExecContext(ctx, s.q(`INSERT INTO outbox
			(key, kind, installation_id, repo, body, status, next_attempt_at, created_at)
		VALUES (?, ?, ?, ?, ?, 'pending', ?, ?)
		ON CONFLICT (key) DO NOTHING`), e.Key, string(e.Kind), e.InstallationID, e.Repo, body, now, now)
	if err != nil {
		return false, fmt.Errorf("put effect %s: %w", e.Key, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("put effect %s: %w", e.Key, err)
	}
	return n == 1, nil
}

// armCheckSync queues (or re-queues) the sync of a check run row: a row
// changed, so GitHub must be told, now, whatever earlier syncs did.
func (s *sqlStore) armCheckSync(ctx context.Context, tx txer, cr CheckRun, now int64) error {
	body, err := json.Marshal(CheckSyncBody{CheckRunID: cr.ID})
	if err != nil {
		return fmt.Errorf("arm check sync %d: %w", cr.ID, err)
	}
	_, err = tx.ExecContext(ctx, s.q(`INSERT INTO outbox
			(key, kind, installation_id, repo, body, status, next_attempt_at, created_at, priority)
		VALUES (?, 'check_sync', ?, ?, ?, 'pending', ?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET status = 'pending', version = outbox.version + 1, attempts = 0,
			next_attempt_at = excluded.next_attempt_at, last_error = '', done_at = NULL,
			installation_id = excluded.installation_id, priority = excluded.priority`),
		CheckSyncKey(cr.ID), cr.InstallationID, cr.Repo, string(body), now, now, syncPriority(cr))
	if err != nil {
		return fmt.Errorf("arm check sync %d: %w", cr.ID, err)
	}
	return nil
}

// ClaimEffects leases up to limit due outbox rows, verdicts first, then
// other writes, then queue notes (effectPriority), oldest first within
// each; each goes to one claimer across workers and replicas.
func (s *sqlStore) ClaimEffects(ctx context.Context, limit int, lease time.Duration) ([]Effect, error) {
	if limit <= 0 || lease <= 0 {
		return nil, fmt.Errorf("claim effects: limit and lease must be positive")
	}
	leaseID, err := s.serverLeaseID()
	if err != nil {
		return nil, err
	}
	now := s.now()
	rows, err := s.w.QueryContext(ctx, s.q(`UPDATE outbox SET lease_id = ?, lease_until = ?, attempts = attempts + 1
		WHERE id IN (SELECT id FROM outbox
			WHERE status = 'pending' AND next_attempt_at <= ? AND (lease_until IS NULL OR lease_until < ?)
			ORDER BY priority, next_attempt_at, id LIMIT ?`+s.d.skipLocked+`)
		RETURNING `+effectCols),
		leaseID, now.Add(lease).UnixMicro(), now.UnixMicro(), now.UnixMicro(), limit)
	if err != nil {
		return nil, fmt.Errorf("claim effects: %w", err)
	}
	defer rows.Close()
	var out []Effect
	for rows.Next() {
		e, err := scanEffect(rows)
		if err != nil {
			return nil, fmt.Errorf("claim effects: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim effects: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// CompleteEffect marks a claimed write done — unless the row was re-armed
// (a newer version) while it was being sent: then it stays pending, due
// now, and is sent again with the newer state. ErrLeaseLost when the claim
// lapsed.
func (s *sqlStore) CompleteEffect(ctx context.Context, id int64, leaseID string, version int) error {
	if leaseID == "" {
		return ErrLeaseLost
	}
	res, err := s.w.ExecContext(ctx, s.q(`UPDATE outbox SET
			status = CASE WHEN version = ? THEN 'done' ELSE status END,
			done_at = CASE WHEN version = ? THEN ? ELSE done_at END,
			last_error = '', lease_id = '', lease_until = NULL
		WHERE id = ? AND lease_id = ? AND status = 'pending'`),
		version, version, s.nowMicros(), id, leaseID)
	return s.effectResult("complete", id, res, err)
}

// RetryEffect releases a claimed write to be tried again at at.
func (s *sqlStore) RetryEffect(ctx context.Context, id int64, leaseID string, at time.Time, reason string) error {
	if leaseID == "" {
		return ErrLeaseLost
	}
	// A row re-armed meanwhile is due now, not at the backoff.
	res, err := s.w.ExecContext(ctx, s.q(`UPDATE outbox SET next_attempt_at = CASE WHEN next_attempt_at > ? THEN next_attempt_at ELSE ? END,
			last_error = ?, lease_id = '', lease_until = NULL
		WHERE id = ? AND lease_id = ? AND status = 'pending'`),
		s.nowMicros(), at.UnixMicro(), reason, id, leaseID)
	return s.effectResult("retry", id, res, err)
}

// FailEffect gives up on a claimed write GitHub refused for good, unless
// the row was re-armed meanwhile (version differs): a newer state may well
// be accepted, so it stays pending.
func (s *sqlStore) FailEffect(ctx context.Context, id int64, leaseID string, version int, reason string) error {
	if leaseID == "" {
		return ErrLeaseLost
	}
	res, err := s.w.ExecContext(ctx, s.q(`UPDATE outbox SET
			status = CASE WHEN version = ? THEN 'failed' ELSE status END,
			last_error = ?, lease_id = '', lease_until = NULL
		WHERE id = ? AND lease_id = ? AND status = 'pending'`),
		version, reason, id, leaseID)
	return s.effectResult("fail", id, res, err)
}

func (s *sqlStore) effectResult(what string, id int64, res sql.Result, err error) error {
	if err != nil {
		return fmt.Errorf("%s effect %d: %w", what, id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s effect %d: %w", what, id, err)
	}
	if n != 1 {
		return fmt.Errorf("%s effect %d: %w", what, id, ErrLeaseLost)
	}
	return nil
}

// ListEffects returns matching outbox rows oldest first.
func (s *sqlStore) ListEffects(ctx context.Context, f EffectFilter) ([]Effect, error) {
	query, args := `SELECT `+effectCols+` FROM outbox WHERE 1 = 1`, []any{}
	if f.Kind != "" {
		query, args = query+` AND kind = ?`, append(args, string(f.Kind))
	}
	if f.Status != "" {
		query, args = query+` AND status = ?`, append(args, string(f.Status))
	}
	if f.Repo != "" {
		query, args = query+` AND repo = ?`, append(args, f.Repo)
	}
	rows, err := s.r.QueryContext(ctx, s.q(query+` ORDER BY id`), args...)
	if err != nil {
		return nil, fmt.Errorf("list effects: %w", err)
	}
	defer rows.Close()
	var out []Effect
	for rows.Next() {
		e, err := scanEffect(rows)
		if err != nil {
			return nil, fmt.Errorf("list effects: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// GetEffect returns the outbox row with key.
func (s *sqlStore) GetEffect(ctx context.Context, key string) (Effect, error) {
	e, err := scanEffect(s.r.QueryRowContext(ctx, s.q(`SELECT `+effectCols+` FROM outbox WHERE key = ?`), key))
	if err != nil {
		return Effect{}, fmt.Errorf("get effect %s: %w", key, notFound(err))
	}
	return e, nil
}

// CountEffects counts the outbox's rows by status.
func (s *sqlStore) CountEffects(ctx context.Context) (map[EffectStatus]int, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT status, COUNT(*) FROM outbox GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("count effects: %w", err)
	}
	defer rows.Close()
	out := map[EffectStatus]int{}
	for rows.Next() {
		var (
			st string
			n  int
		)
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("count effects: %w", err)
		}
		out[EffectStatus(st)] = n
	}
	return out, rows.Err()
}

// Outbox priorities (migration 0014): claimed lowest first.
const (
	EffectPriorityVerdict = 0 // a check run's completed state
	EffectPriorityWrite   = 1 // comments, reactions, cancels, other syncs
	EffectPriorityNote    = 2 // a queued check's sync: its queue note
)

// syncPriority is the priority of a check run row's sync: its verdict
// goes before everything, its queue note after everything.
func syncPriority(cr CheckRun) int {
	if cr.Desired == nil {
		return EffectPriorityWrite
	}
	switch cr.Desired.Status {
	case "completed":
		return EffectPriorityVerdict
	case "queued":
		return EffectPriorityNote
	}
	return EffectPriorityWrite
}
