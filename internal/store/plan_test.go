package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/store/storetest"
)

// TestClaimPlanPostgres: the claim walks the jobs_claim index in claim
// order and stops at the first job the agent can run — no sort of the
// queue — with fresh statistics and without, and a drained agent's claim
// is decided once, before the walk; the aged jobs are found through
// their own index (jobs_aged), not by a walk of the queue.
func TestClaimPlanPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a queue of 2,000 jobs")
	}
	dsn := storetest.PostgresDSN(t)
	ctx := context.Background()
	st, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range 2000 {
		if _, err := st.Enqueue(ctx, store.JobSpec{Repo: fmt.Sprintf("acme/r%d", i%50), Tier: []string{"quick", "merge", "nightly"}[i%3],
			Labels: []string{"gpu", []string{"a100", "h100"}[i%2]}}); err != nil {
			t.Fatal(err)
		}
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, analyzed := range []bool{false, true} {
		if analyzed {
			if _, err := db.ExecContext(ctx, "ANALYZE jobs"); err != nil {
				t.Fatal(err)
			}
		}
		rows, err := db.QueryContext(ctx, "EXPLAIN SELECT "+store.ClaimPickSQL(), 1, `["gpu","h100"]`, `[]`, 1, `["gpu","h100"]`, `[]`, int64(1), 1, `["gpu","h100"]`, `[]`)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		rows.Close()
		text := strings.Join(plan, "\n")
		aged := strings.Contains(text, "Index Scan using jobs_aged") || strings.Contains(text, "Bitmap Index Scan on jobs_aged")
		if !strings.Contains(text, "Index Scan using jobs_claim") || !aged || sortsQueue(plan) || !strings.Contains(text, "One-Time Filter") {
			t.Errorf("claim plan (analyzed %v) does not walk jobs_claim once per claim:\n%s", analyzed, text)
		}
	}
}

// sortsQueue reports whether a Sort node of plan (EXPLAIN's lines) reads
// the queue through jobs_claim. The aged probe may sort what jobs_aged
// finds (the planner does so when it expects few rows: only jobs past
// their aging bound, few by construction); the walk of the queue must
// never be sorted.
func sortsQueue(plan []string) bool {
	indent := func(l string) int { return len(l) - len(strings.TrimLeft(l, " ->")) }
	for i, l := range plan {
		if !strings.Contains(l, "Sort ") || strings.Contains(l, "Sort Key") {
			continue
		}
		for _, below := range plan[i+1:] {
			if indent(below) <= indent(l) {
				break
			}
			if strings.Contains(below, "jobs_claim") {
				return true
			}
		}
	}
	return false
}

// TestClaimPlanSQLite: on SQLite too the claim walks jobs_claim in order,
// with no sort.
func TestClaimPlanSQLite(t *testing.T) {
	p := sqliteDSN(t)
	ctx := context.Background()
	st, err := store.Open(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if _, err := st.Enqueue(ctx, store.JobSpec{Repo: fmt.Sprintf("acme/r%d", i%20), Tier: []string{"quick", "merge"}[i%2]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", p)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "EXPLAIN QUERY PLAN SELECT "+store.ClaimPickSQLite(), 1, `["gpu"]`, `[]`, 1, `["gpu"]`, `[]`, int64(1), 1, `["gpu"]`, `[]`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	text := strings.Join(plan, "\n")
	if !strings.Contains(text, "SCAN j USING INDEX jobs_claim") || !strings.Contains(text, "USING INDEX jobs_aged") || strings.Contains(text, "TEMP B-TREE") {
		t.Errorf("claim plan does not walk jobs_claim in order:\n%s", text)
	}
}
