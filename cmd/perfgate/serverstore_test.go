package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/github/server"
	"github.com/perfgate/perfgate/internal/store"
)

// The commands that read the server's store find it as perfgate serve
// does — PERFGATE_DATA_DIR, PERFGATE_DATABASE_URL, the server config —
// from any directory, and refuse, naming where they looked, when no store
// is there, creating nothing.
func TestOperatorCommandsFindTheServersStore(t *testing.T) {
	root := t.TempDir()
	srv := filepath.Join(root, "srv")
	if err := os.Mkdir(srv, 0o700); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(srv, "perfgate.db")
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.RegisterAgent(context.Background(), store.AgentRegistration{Name: "gpu-a", Labels: []string{"gpu"}, TokenHash: store.HashToken("a")}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	cfg := filepath.Join(root, "server.yml")
	if err := os.WriteFile(cfg, []byte("data_dir: "+srv+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(root, "nowhere")
	empty := filepath.Join(root, "empty") // the operator's shell, somewhere else
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Chdir(empty)

	tests := []struct {
		name string
		env  map[string]string
		args []string
		code int
		out  string   // on stdout
		errs []string // each on stderr
	}{
		{name: "PERFGATE_DATA_DIR", env: map[string]string{"PERFGATE_DATA_DIR": srv}, args: []string{"runners"}, out: "gpu-a"},
		{name: "PERFGATE_DATABASE_URL", env: map[string]string{"PERFGATE_DATABASE_URL": db}, args: []string{"runners"}, out: "gpu-a"},
		{name: "PERFGATE_CONFIG", env: map[string]string{"PERFGATE_CONFIG": cfg}, args: []string{"runners", "--json"}, out: `"gpu-a"`},
		{name: "--server-config", args: []string{"runners", "--server-config", cfg}, out: "gpu-a"},
		{name: "--db", args: []string{"runners", "--db", db}, out: "gpu-a"},
		{name: "usage with PERFGATE_DATA_DIR", env: map[string]string{"PERFGATE_DATA_DIR": srv}, args: []string{"usage"}, out: "No GPU time recorded"},
		{name: "baseline with PERFGATE_DATA_DIR", env: map[string]string{"PERFGATE_DATA_DIR": srv}, args: []string{"baseline", "list", "--repo", "acme/llm"}},
		{name: "no store in the working directory", args: []string{"runners"}, code: 3,
			errs: []string{"no perfgate database at " + filepath.Join(empty, "perfgate.db"), "the working directory", "PERFGATE_DATA_DIR"}},
		{name: "PERFGATE_DATA_DIR without a store", env: map[string]string{"PERFGATE_DATA_DIR": missing}, args: []string{"runners"}, code: 3,
			errs: []string{"no perfgate database at " + filepath.Join(missing, "perfgate.db"), "PERFGATE_DATA_DIR=" + missing}},
		{name: "drain without a store", env: map[string]string{"PERFGATE_DATA_DIR": missing}, args: []string{"runners", "drain", "gpu-a"}, code: 3,
			errs: []string{"no perfgate database at " + filepath.Join(missing, "perfgate.db")}},
		{name: "usage without a store", args: []string{"usage"}, code: 3, errs: []string{"no perfgate database at " + filepath.Join(empty, "perfgate.db")}},
		{name: "baseline without a store", args: []string{"baseline", "list", "--repo", "acme/llm"}, code: 3, errs: []string{"no perfgate database at"}},
		{name: "--db without a store", env: map[string]string{"PERFGATE_DATA_DIR": srv}, args: []string{"runners", "--db", "typo.db"}, code: 3,
			errs: []string{"no perfgate database at " + filepath.Join(empty, "typo.db"), "after --db"}},
		{name: "server config with a bad key", args: []string{"runners", "--server-config", filepath.Join(root, "nope.yml")}, code: 3,
			errs: []string{"find the server's database", "nope.yml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, s := range server.Settings {
				t.Setenv(s.Env, "")
			}
			t.Setenv("PERFGATE_CONFIG", "")
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			code, out, errOut := run(t, tt.args...)
			if code != tt.code || !strings.Contains(out, tt.out) {
				t.Errorf("perfgate %s: exit %d, want %d; stdout %q (want %q); stderr %q", strings.Join(tt.args, " "), code, tt.code, out, tt.out, errOut)
			}
			for _, want := range tt.errs {
				if !strings.Contains(errOut, want) {
					t.Errorf("perfgate %s: stderr %q lacks %q", strings.Join(tt.args, " "), errOut, want)
				}
			}
			// Nothing is created where the command looked.
			for _, p := range []string{filepath.Join(empty, "perfgate.db"), filepath.Join(empty, "typo.db"), missing} {
				if _, err := os.Stat(p); err == nil {
					t.Errorf("perfgate %s created %s", strings.Join(tt.args, " "), p)
				}
			}
		})
	}
}
