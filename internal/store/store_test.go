package store_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx" for creating test schemas

	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/store/storetest"
)

func TestSQLite(t *testing.T) {
	storetest.Run(t, sqliteDSN)
}

func TestPostgres(t *testing.T) {
	storetest.Run(t, postgresDSN)
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
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
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

// postgresDSN creates a schema of its own on the test server, drops it when
// the test ends, and returns a DSN whose search_path points at it, so
// parallel tests and parallel runs never share tables.
func postgresDSN(t testing.TB) string {
	t.Helper()
	base := os.Getenv("PERFGATE_TEST_POSTGRES")
	if base == "" {
		base = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("PERFGATE_TEST_POSTGRES %q: %v", base, err)
	}
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		msg := "PostgreSQL is not reachable at " + base + " (set PERFGATE_TEST_POSTGRES, or start it: .ci/run does): " + err.Error()
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "perfgate_test_" + hex.EncodeToString(b[:])
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("PERFGATE_TEST_POSTGRES %q: %v", base, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// BenchmarkQueue: 50 claimers drain 10,000 jobs.
//
//	go test -run XXX -bench Queue -benchtime 1x ./internal/store/
func BenchmarkQueue(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) { storetest.BenchQueue(b, sqliteDSN(b), 50, 10000) })
	b.Run("postgres", func(b *testing.B) { storetest.BenchQueue(b, postgresDSN(b), 50, 10000) })
}
