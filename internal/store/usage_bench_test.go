package store_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/store"
)

// BenchmarkUsageSQLite: `perfgate usage` (Usage, summed in SQL) over
// PERFGATE_USAGE_ATTEMPTS attempts (default 10,000,000) on SQLite: five
// attempts each of a fifth as many jobs, 100 repositories, 3 tiers, a job
// a minute (2,000,000 jobs span 200 weeks: 60,000 rows in the answer).
// Loading takes minutes; B/op is what one Usage call allocates.
//
//	go test -run XXX -bench UsageSQLite -benchtime 1x -benchmem -timeout 60m ./internal/store/
func BenchmarkUsageSQLite(b *testing.B) {
	n := 10_000_000
	if v := os.Getenv("PERFGATE_USAGE_ATTEMPTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	const perJob = 5
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "usage.db")
	st, err := store.Open(ctx, path) // the schema
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	load, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_pragma=synchronous(OFF)")
	if err != nil {
		b.Fatal(err)
	}
	defer load.Close()
	start := time.Now()
	t0 := time.Date(2023, 1, 2, 0, 0, 0, 0, time.UTC).UnixMicro()
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO jobs (id, tier, repo, config, status, created_at)
			WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < ?)
			SELECT i, CASE i % 3 WHEN 0 THEN 'quick' WHEN 1 THEN 'nightly' ELSE 'merge' END, 'acme/r' || (i % 100), '', 'succeeded', 0 FROM g`,
			[]any{n / perJob}},
		{`INSERT INTO gpu_attempts (job_id, attempt, repo, tier, status, started_at, ended_at)
			WITH RECURSIVE a(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM a WHERE k < ?)
			SELECT id, k, repo, tier, CASE k WHEN ? THEN 'succeeded' ELSE 'lost' END,
				? + id * 60000000 + k * 1000000, ? + id * 60000000 + k * 1000000 + 600000 FROM jobs, a`,
			[]any{perJob, perJob, t0, t0}},
	} {
		if _, err := load.ExecContext(ctx, q.sql, q.args...); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("loaded %d attempts of %d jobs in %v", n, n/perJob, time.Since(start).Round(time.Second))
	b.ResetTimer()
	b.ReportAllocs()
	for range b.N {
		rows, err := st.Usage(ctx, store.UsageFilter{})
		if err != nil || len(rows) == 0 {
			b.Fatal(len(rows), err)
		}
		b.ReportMetric(float64(len(rows)), "rows")
	}
}
