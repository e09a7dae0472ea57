package store_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

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

// BenchmarkQueue: 50 claimers drain 10,000 jobs.
//
//	go test -run XXX -bench Queue -benchtime 1x ./internal/store/
func BenchmarkQueue(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) { storetest.BenchQueue(b, sqliteDSN(b), 50, 10000) })
	b.Run("postgres", func(b *testing.B) { storetest.BenchQueue(b, storetest.PostgresDSN(b), 50, 10000) })
}
