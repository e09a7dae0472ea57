package store

import (
	"context"
	"fmt"
)

// RunningQueuedChecks returns the running jobs whose check run still
// shows queued (by its id, or for a job without one by repository,
// commit and tier): what the start sync moves to in progress, read
// without the jobs' plans instead of every running job.
func (s *sqlStore) RunningQueuedChecks(ctx context.Context) ([]int64, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT j.id FROM jobs j JOIN check_runs c
			ON c.id = j.check_run_id OR (j.check_run_id = 0 AND c.repo = j.repo AND c.head_sha = j.head_sha AND c.tier = j.tier)
		WHERE j.status = 'running' AND c.state = 'queued' ORDER BY j.id`)
	if err != nil {
		return nil, fmt.Errorf("running jobs of queued checks: %w", err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("running jobs of queued checks: %w", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("running jobs of queued checks: %w", err)
	}
	return out, nil
}
