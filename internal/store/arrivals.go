package store

import (
	"context"
	"fmt"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/fleet"
)

// arrivalsScan bounds how many of the newest jobs Arrivals reads: the
// count walks the primary key back from the newest job instead of the
// whole table (20,000 jobs is a day at 100 repositories and 50 GPUs).
const arrivalsScan = 20000

// Arrivals counts the jobs queued since since by class, tenant, tier and
// pool, how many of them since recent, and their mean fair-share cost:
// the arrival rates the queue estimate expects (fleet.Streams).
func (s *sqlStore) Arrivals(ctx context.Context, since, recent time.Time) ([]fleet.Arrived, error) {
	rows, err := s.r.QueryContext(ctx, s.q(`SELECT priority, share_key, tier, pool, COUNT(*),
			SUM(CASE WHEN created_at >= ? THEN 1 ELSE 0 END), CAST(AVG(vcost) AS DOUBLE PRECISION)
		FROM jobs WHERE id > (SELECT COALESCE(MAX(id), 0) FROM jobs) - ? AND created_at >= ?
		GROUP BY priority, share_key, tier, pool`), recent.UnixMicro(), arrivalsScan, since.UnixMicro())
	if err != nil {
		return nil, fmt.Errorf("arrivals: %w", err)
	}
	defer rows.Close()
	var out []fleet.Arrived
	for rows.Next() {
		var a fleet.Arrived
		if err := rows.Scan(&a.Priority, &a.Tenant, &a.Tier, &a.Pool, &a.Count, &a.Recent, &a.Cost); err != nil {
			return nil, fmt.Errorf("arrivals: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("arrivals: %w", err)
	}
	return out, nil
}
