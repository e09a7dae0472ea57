package store

import (
	"context"
	"fmt"
	"sort"
)

// Refunds. A job's estimate is charged to its tenant's flow when it is
// queued (placeJob), so the tenant's next job lines up behind it. A job
// cancelled before it ever ran used no GPU time: without a refund its
// tenant's next job would wait behind every job it never ran — with 8
// runners, 10 busy repositories and 10-minute jobs, a repository whose 5
// queued jobs were cancelled waited about an hour for its next one instead
// of one round (storetest's FleetRefund). A job that ran settles its own account when its attempt ends
// (chargeAttempt: the GPU time less the estimate), so only never-started
// jobs are refunded here.

// refundQueued takes the cancelled jobs that never started out of their
// tenants' lines: the tenant's queued jobs behind each move up by its
// cost and the tenant's finish moves back by it, so the tenant's next job
// lines up behind its remaining work, no further. A job cancelled for a
// newer push is taken out too: the push's job that takes its place is put
// back in (insertInLine).
func (s *sqlStore) refundQueued(ctx context.Context, tx txer, cancelled []Job) error {
	var out []Job
	for _, j := range cancelled {
		if j.Attempts == 0 && j.ShareKey != "" && j.VCost > 0 {
			out = append(out, j)
		}
	}
	// From the back of each line, so a job's tag is final when the jobs
	// behind it move up past it.
	sort.Slice(out, func(a, b int) bool { return out[a].VTag > out[b].VTag })
	for _, j := range out {
		if err := s.shiftLine(ctx, tx, j.Priority, j.ShareKey, j.VTag, false, -j.VCost); err != nil {
			return fmt.Errorf("refund job %d: %w", j.ID, err)
		}
	}
	return nil
}

// insertInLine puts a job of cost back at tag in its tenant's line (a
// newer push's job taking a superseded job's place): the queued jobs at or
// behind tag move back by cost, and so does the tenant's finish.
func (s *sqlStore) insertInLine(ctx context.Context, tx txer, priority int, key string, tag, cost float64) error {
	return s.shiftLine(ctx, tx, priority, key, tag, true, cost)
}

// shiftLine moves the tenant's queued jobs behind tag (at it too, when
// atTag) and its finish by delta.
func (s *sqlStore) shiftLine(ctx context.Context, tx txer, priority int, key string, tag float64, atTag bool, delta float64) error {
	cmp := ">"
	if atTag {
		cmp = ">="
	}
	if _, err := tx.ExecContext(ctx, s.q(`UPDATE jobs SET vtag = vtag + ?
		WHERE status = 'queued' AND priority = ? AND share_key = ? AND vtag `+cmp+` ?`), delta, priority, key, tag); err != nil {
		return fmt.Errorf("move %s's line: %w", key, err)
	}
	if _, err := tx.ExecContext(ctx, s.q(`UPDATE fleet_flows SET finish = finish + ? WHERE priority = ? AND share_key = ?`),
		delta, priority, key); err != nil {
		return fmt.Errorf("move %s's finish: %w", key, err)
	}
	return nil
}

// lockFlows takes the tenant's clocks before any of its jobs is changed,
// so transactions that move a line (enqueue, cancel) take their locks in
// one order and never deadlock (PostgreSQL; SQLite's writes are serial).
func (s *sqlStore) lockFlows(ctx context.Context, tx txer, key string) error {
	if s.d.forUpdate == "" {
		return nil
	}
	if _, err := tx.ExecContext(ctx, s.q(`SELECT priority FROM fleet_flows WHERE share_key = ? ORDER BY priority`+s.d.forUpdate), key); err != nil {
		return fmt.Errorf("lock %s's clocks: %w", key, err)
	}
	return nil
}
