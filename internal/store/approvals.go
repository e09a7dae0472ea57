package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

const approvalCols = `repo, head_sha, pr_number, approved_by, role, via, created_at`

func scanApproval(sc scanner) (Approval, error) {
	var (
		a       Approval
		created sql.NullInt64
	)
	if err := sc.Scan(&a.Repo, &a.HeadSHA, &a.PRNumber, &a.By, &a.Role, &a.Via, &created); err != nil {
		return Approval{}, err
	}
	a.CreatedAt = fromMicros(created)
	return a, nil
}

// ApproveCommit records that a.By approved running the commit a.HeadSHA
// (a full SHA) of a fork, with the audit entry saying so, in one
// transaction. An approval is of that commit only. A commit already
// approved keeps its first approval: created is false and the stored one
// is returned.
func (s *sqlStore) ApproveCommit(ctx context.Context, a Approval) (Approval, bool, error) {
	a.HeadSHA = strings.ToLower(a.HeadSHA)
	if a.Repo == "" || len(a.HeadSHA) != 40 || a.By == "" {
		return Approval{}, false, fmt.Errorf("approve commit: repo, a full head SHA and the approver are required")
	}
	var (
		out     Approval
		created bool
	)
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := s.nowMicros()
		row, err := scanApproval(tx.QueryRowContext(ctx, s.q(`INSERT INTO commit_approvals
			(repo, head_sha, pr_number, approved_by, role, via, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (repo, head_sha) DO NOTHING RETURNING `+approvalCols),
			a.Repo, a.HeadSHA, a.PRNumber, a.By, a.Role, a.Via, now))
		if errors.Is(err, sql.ErrNoRows) {
			out, err = scanApproval(tx.QueryRowContext(ctx, s.q(`SELECT `+approvalCols+` FROM commit_approvals
				WHERE repo = ? AND head_sha = ?`), a.Repo, a.HeadSHA))
			return err
		}
		if err != nil {
			return err
		}
		out, created = row, true
		detail, err := json.Marshal(map[string]any{"sha": a.HeadSHA, "role": a.Role, "via": a.Via})
		if err != nil {
			return fmt.Errorf("encode audit detail: %w", err)
		}
		return insertAudit(ctx, s, tx, AuditEntry{Actor: a.By, Action: "commit.approved", Repo: a.Repo, PRNumber: a.PRNumber, Detail: detail}, now)
	})
	if err != nil {
		return Approval{}, false, fmt.Errorf("approve %s@%s: %w", a.Repo, a.HeadSHA, err)
	}
	return out, created, nil
}

// GetApproval returns the approval of (repo, sha); ErrNotFound when the
// commit was never approved.
func (s *sqlStore) GetApproval(ctx context.Context, repo, sha string) (Approval, error) {
	a, err := scanApproval(s.r.QueryRowContext(ctx, s.q(`SELECT `+approvalCols+` FROM commit_approvals
		WHERE repo = ? AND head_sha = ?`), repo, strings.ToLower(sha)))
	if err != nil {
		return Approval{}, fmt.Errorf("approval of %s@%s: %w", repo, sha, notFound(err))
	}
	return a, nil
}
