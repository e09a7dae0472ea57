package store

import (
	"context"
	"fmt"
	"slices"
)

// Pools. A runner's claim walks the claim order until the first job it
// can run; a runner no queued job is for used to walk the whole queue to
// find nothing, on every poll (1,000 idle runners against 10,000 queued
// jobs saturated a PostgreSQL core). The pools jobs are queued for are
// few and recorded as jobs are queued (queue_pools, migration 0013), so a
// claim first matches the runner against them and answers ErrNoJob at
// once when none is its — O(pools), not O(queue).

// notePool records the pool of a job being queued; a pool seen before
// costs one index probe.
func (s *sqlStore) notePool(ctx context.Context, tx txer, pool string, spec JobSpec) error {
	if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO queue_pools (pool, required_labels, gpu_uuid) VALUES (?, ?, ?)
		ON CONFLICT (pool) DO NOTHING`), pool, jsonList(spec.Labels), spec.GPUUUID); err != nil {
		return fmt.Errorf("record pool %q: %w", pool, err)
	}
	return nil
}

// servesAnyPool reports whether the runner of req can run the jobs of any
// pool ever queued for (its labels hold a pool's labels; a pinned pool's
// card is among its GPUs).
func (s *sqlStore) servesAnyPool(ctx context.Context, req ClaimRequest) (bool, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT required_labels, gpu_uuid FROM queue_pools`)
	if err != nil {
		return false, fmt.Errorf("queue pools: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var labels, gpu string
		if err := rows.Scan(&labels, &gpu); err != nil {
			return false, fmt.Errorf("queue pools: %w", err)
		}
		want, err := parseList(labels)
		if err != nil {
			return false, fmt.Errorf("queue pools: %w", err)
		}
		if (gpu == "" || slices.Contains(req.GPUUUIDs, gpu)) && !slices.ContainsFunc(want, func(l string) bool { return !slices.Contains(req.Labels, l) }) {
			return true, nil
		}
	}
	return false, rows.Err()
}
