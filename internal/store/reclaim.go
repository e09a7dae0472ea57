package store

import (
	"context"
	"fmt"
)

// ReclaimLeases frees the leases this instance took before it restarted:
// inbox deliveries, outbox writes and judgements it was working on when it
// died. They are claimable at once instead of after their lease lapses
// (3 minutes for a delivery, 2 for a write), so a crash delays GitHub by
// seconds. Without an instance name it frees nothing: a lease without one
// could be another live replica's.
func (s *sqlStore) ReclaimLeases(ctx context.Context) (Reclaimed, error) {
	var out Reclaimed
	if s.instance == "" {
		return out, nil
	}
	prefix := s.instance + "/"
	for _, r := range []struct {
		what, stmt string
		n          *int64
	}{
		{"deliveries", `UPDATE webhook_inbox SET lease_id = '', lease_until = NULL
			WHERE status = 'pending' AND lease_until IS NOT NULL AND substr(lease_id, 1, ?) = ?`, &out.Deliveries},
		{"outbox writes", `UPDATE outbox SET lease_id = '', lease_until = NULL
			WHERE status = 'pending' AND lease_until IS NOT NULL AND substr(lease_id, 1, ?) = ?`, &out.Effects},
		{"judgements", `UPDATE jobs SET judge_lease_id = '', judge_lease_until = NULL
			WHERE judged_at IS NULL AND judge_lease_until IS NOT NULL AND substr(judge_lease_id, 1, ?) = ?`, &out.Judgements},
	} {
		res, err := s.w.ExecContext(ctx, s.q(r.stmt), len(prefix), prefix)
		if err != nil {
			return out, fmt.Errorf("reclaim %s of instance %s: %w", r.what, s.instance, err)
		}
		if *r.n, err = res.RowsAffected(); err != nil {
			return out, fmt.Errorf("reclaim %s of instance %s: %w", r.what, s.instance, err)
		}
	}
	return out, nil
}
