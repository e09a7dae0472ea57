package store_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/fleet"
	"github.com/perfgate/perfgate/internal/poll"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/store/storetest"
)

func TestSQLite(t *testing.T) {
	storetest.Run(t, sqliteDSN)
}

func TestPostgres(t *testing.T) {
	storetest.Run(t, storetest.PostgresDSN)
}

func TestOpenDSNForms(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, dsn string
		ok        bool
	}{
		{"plain path", filepath.Join(dir, "a.db"), true},
		{"sqlite URL", "sqlite://" + filepath.Join(dir, "b.db"), true},
		{"file URI with query", "file:" + filepath.Join(dir, "c.db") + "?cache=private", true},
		{"in memory", ":memory:", true},
		{"empty", "", false},
		{"bad postgres URL", "postgres://%zz", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(poll.Context(t))
			defer cancel()
			st, err := store.Open(ctx, tc.dsn)
			if !tc.ok {
				if err == nil {
					st.Close()
					t.Fatalf("Open(%q) succeeded, want an error", tc.dsn)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open(%q): %v", tc.dsn, err)
			}
			defer st.Close()
			j, err := st.Enqueue(ctx, store.JobSpec{Repo: "acme/llm", Tier: "quick"})
			if err != nil {
				t.Fatal(err)
			}
			if got, err := st.GetJob(ctx, j.ID); err != nil || got.ID != j.ID {
				t.Fatalf("read back through the read pool: %+v, %v", got, err)
			}
		})
	}
}

func sqliteDSN(t testing.TB) string {
	return filepath.Join(t.TempDir(), "perfgate.db")
}

// BenchmarkQueue: 50 claimers drain 10,000 jobs.
//
//	go test -run XXX -bench Queue -benchtime 1x ./internal/store/
func BenchmarkQueue(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) { storetest.BenchQueue(b, sqliteDSN(b), 50, 10000) })
	b.Run("postgres", func(b *testing.B) { storetest.BenchQueue(b, storetest.PostgresDSN(b), 50, 10000) })
}

// BenchmarkFleet: the claim path of a shared fleet — 10,000 queued jobs
// over 200 repositories with priorities, weights, pools and pins; 100
// agents claiming through two server replicas (store handles) on one
// database. SQLite serves one server, so its run has one handle.
//
//	go test -run XXX -bench Fleet -benchtime 1x ./internal/store/
func BenchmarkFleet(b *testing.B) {
	b.Run("postgres", func(b *testing.B) { storetest.BenchFleet(b, storetest.PostgresDSN(b), 10000, 200, 100, 2) })
	b.Run("sqlite", func(b *testing.B) { storetest.BenchFleet(b, sqliteDSN(b), 10000, 200, 100, 1) })
}

// BenchmarkIdleClaims: 1,000 runners of an unserved pool poll against
// 10,000 queued jobs none of them can run.
//
//	go test -run XXX -bench IdleClaims -benchtime 2000x ./internal/store/
func BenchmarkIdleClaims(b *testing.B) {
	b.Run("postgres", func(b *testing.B) { storetest.BenchIdleClaims(b, storetest.PostgresDSN(b), 1000, 10000) })
	b.Run("sqlite", func(b *testing.B) { storetest.BenchIdleClaims(b, sqliteDSN(b), 1000, 10000) })
}

func TestRedact(t *testing.T) {
	cases := map[string]string{
		"postgres://perfgate:s3cret@db:5432/perfgate":                   "postgres://perfgate:xxxxx@db:5432/perfgate",
		"postgres://db:5432/perfgate?sslmode=require&password=s3cret":   "postgres://db:5432/perfgate?password=xxxxx&sslmode=require",
		"postgresql://u@db/p?sslpassword=k3y&application_name=perfgate": "postgresql://u@db/p?application_name=perfgate&sslpassword=xxxxx",
		"https://perfgate.example.com/hook?token=abc":                   "https://perfgate.example.com/hook?token=xxxxx",
		"/var/lib/perfgate/perfgate.db":                                 "/var/lib/perfgate/perfgate.db",
		"file:/tmp/x.db?_pragma=busy_timeout(5000)":                     "file:/tmp/x.db?_pragma=busy_timeout(5000)",
	}
	for in, want := range cases {
		if got := store.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
		if strings.Contains(store.Redact(in), "s3cret") || strings.Contains(store.Redact(in), "k3y") {
			t.Errorf("Redact(%q) leaks the secret", in)
		}
	}
}

// A database written by the first schema keeps its meaning: deliveries
// seen before are duplicates, finished jobs are not judged again, and jobs
// name their check run row instead of the GitHub run.
func TestMigrationFromV1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v1.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	v1, err := os.ReadFile("migrations/sqlite/0001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{string(v1),
		`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`,
		`INSERT INTO schema_migrations VALUES (1, '0001_init.sql', 0)`,
		`INSERT INTO webhook_deliveries VALUES ('seen-before', 'pull_request', 1)`,
		`INSERT INTO check_runs (repo, head_sha, tier, github_id, state, created_at, updated_at) VALUES ('acme/llm', 'abc', 'quick', 555, 'queued', 1, 1)`,
		`INSERT INTO jobs (tier, repo, config, status, check_run_id, created_at, finished_at) VALUES ('quick', 'acme/llm', x'', 'succeeded', 555, 1, 2)`,
		`INSERT INTO jobs (tier, repo, config, status, check_run_id, created_at) VALUES ('quick', 'acme/llm', x'', 'queued', 555, 1)`,
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt[:min(len(stmt), 60)], err)
		}
	}
	db.Close()
	st, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if a, err := st.AcceptDelivery(ctx, "seen-before", "pull_request", []byte(`{}`), store.DeliveryOrder{}); err != nil || a != store.AcceptedDuplicate {
		t.Errorf("a delivery seen before the upgrade: %v %v, want a duplicate", a, err)
	}
	claims, err := st.ClaimFinishedJobs(ctx, 10, time.Minute)
	if err != nil || len(claims) != 0 {
		t.Errorf("jobs finished before the upgrade are judged again: %+v %v", claims, err)
	}
	cr, err := st.GetCheckRun(ctx, "acme/llm", "abc", "quick")
	if err != nil {
		t.Fatal(err)
	}
	if j, _ := st.GetJob(ctx, 2); j.CheckRunID != cr.ID {
		t.Errorf("job's check run = %d, want the row %d", j.CheckRunID, cr.ID)
	}
}

// The SQLite database and its WAL files are the owner's alone (0600), even
// under a permissive umask.
func TestSQLiteFileMode(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "perfgate.db")
	st, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.AcceptDelivery(context.Background(), "d-1", "ping", []byte(`{}`), store.DeliveryOrder{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if m := fi.Mode().Perm(); m != 0o600 {
			t.Errorf("%s mode %o, want 600", filepath.Base(p), m)
		}
	}
}

// BenchmarkUsage: `perfgate usage` over 300,000 attempts on PostgreSQL,
// summed by the database (Usage) and, as before, loaded and summed in
// memory (ListAttempts, then fleet.Usage). B/op is what each allocates.
//
//	go test -run XXX -bench Usage -benchtime 3x -benchmem ./internal/store/
func BenchmarkUsage(b *testing.B) {
	const n = 300000
	dsn := storetest.PostgresDSN(b)
	ctx := context.Background()
	st, err := store.Open(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	t0 := time.Date(2025, 1, 6, 0, 0, 0, 0, time.UTC).UnixMicro()
	for _, q := range []struct {
		sql string
		arg int64
	}{
		{`INSERT INTO jobs (tier, repo, config, status, created_at)
			SELECT (ARRAY['quick','nightly','merge'])[1 + g % 3], 'acme/r' || (g % 100), '', 'succeeded', 0 FROM generate_series(1, $1) g`, n},
		{`INSERT INTO gpu_attempts (job_id, attempt, repo, tier, status, started_at, ended_at)
			SELECT id, 1, repo, tier, 'succeeded', $1 + id * 60000000, $1 + id * 60000000 + 600000000 FROM jobs`, t0},
	} {
		if _, err := db.ExecContext(ctx, q.sql, q.arg); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("sql", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			rows, err := st.Usage(ctx, store.UsageFilter{})
			if err != nil || len(rows) == 0 {
				b.Fatal(rows, err)
			}
		}
	})
	b.Run("in-memory", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			attempts, err := st.ListAttempts(ctx, store.AttemptFilter{})
			if err != nil || len(attempts) != n {
				b.Fatal(len(attempts), err)
			}
			ua := make([]fleet.UsageAttempt, 0, len(attempts))
			for _, a := range attempts {
				ua = append(ua, fleet.UsageAttempt{JobID: a.JobID, Repo: a.Repo, Tier: a.Tier, Started: a.StartedAt, Ended: a.EndedAt})
			}
			if rows := fleet.Usage(ua, nil, nil); len(rows) == 0 {
				b.Fatal("no rows")
			}
		}
	})
}
