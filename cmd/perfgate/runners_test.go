package main

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/fleet"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
)

// perfgate runners lists the runners with their cards, state and job;
// drain stops one taking jobs while it finishes its own; usage sums the
// GPU time.
func TestRunnersDrainUsage(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "perfgate.db")
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h100 := fleet.Card{UUID: "GPU-1", Model: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, Driver: "550.54.15"}
	a, err := st.RegisterAgent(ctx, store.AgentRegistration{Name: "gpu-a", Labels: []string{"gpu", "h100"}, GPUUUIDs: []string{"GPU-1"},
		Cards: []fleet.Card{h100}, TokenHash: store.HashToken("a")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.RegisterAgent(ctx, store.AgentRegistration{Name: "gpu-b", Labels: []string{"gpu"}, TokenHash: store.HashToken("b")}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := st.Enqueue(ctx, store.JobSpec{Repo: "acme/llm", Tier: "quick", Labels: []string{"gpu"}}); err != nil {
			t.Fatal(err)
		}
	}
	job, err := st.Claim(ctx, store.ClaimRequest{AgentID: a.ID, Labels: a.Labels, GPUUUIDs: a.GPUUUIDs, Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}

	code, out, errOut := run(t, "runners", "--db", db)
	if code != 0 {
		t.Fatalf("runners: %d %s", code, errOut)
	}
	for _, want := range []string{"NAME", "gpu-a", "busy", "1× NVIDIA H100 80GB HBM3 (80 GiB, driver 550.54.15)", "#1 acme/llm quick", "gpu-b", "idle", "gpu,h100"} {
		if !strings.Contains(out, want) {
			t.Errorf("runners lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = run(t, "runners", "--json", "--db", db)
	var list struct{ Runners []runnerView }
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list.Runners) != 2 || list.Runners[0].Jobs[0].ID != job.ID || list.Runners[0].Cards[0] != h100 {
		t.Errorf("runners --json: %d %s", code, out)
	}

	code, out, errOut = run(t, "runners", "drain", "gpu-a", "--db", db)
	if code != 0 || !strings.Contains(out, "gpu-a is draining: it finishes job #1 (acme/llm quick) and takes no more") {
		t.Fatalf("drain: %d %q %q", code, out, errOut)
	}
	if j, err := st.Claim(ctx, store.ClaimRequest{AgentID: a.ID, Labels: a.Labels, GPUUUIDs: a.GPUUUIDs, Lease: time.Hour}); !errors.Is(err, store.ErrNoJob) {
		t.Errorf("drained runner claimed job %d (%v)", j.ID, err)
	}
	if _, out, _ := run(t, "runners", "--db", db); !strings.Contains(out, "draining") {
		t.Errorf("runners after drain:\n%s", out)
	}
	if _, err := st.Finish(ctx, job.ID, job.LeaseID, jobstate.Succeeded, ""); err != nil {
		t.Fatal(err)
	}
	if _, out, _ := run(t, "runners", "--db", db); !strings.Contains(out, "drained") || strings.Contains(out, "draining") {
		t.Errorf("runners after its job:\n%s", out)
	}
	if code, _, errOut := run(t, "runners", "drain", "gpu-c", "--db", db); code != 1 || !strings.Contains(errOut, `no runner named "gpu-c"; did you mean "gpu-a"?`) {
		t.Errorf("drain unknown: %d %q", code, errOut)
	}
	if code, _, errOut := run(t, "runners", "drian", "--db", db); code != 3 || !strings.Contains(errOut, `did you mean "drain"?`) {
		t.Errorf("misspelt subcommand: %d %q", code, errOut)
	}
	if code, _, _ := run(t, "runners", "drain", "--db", db); code != 3 {
		t.Errorf("drain without a name: %d", code)
	}
	if code, out, _ := run(t, "runners", "undrain", "gpu-a", "--db", db); code != 0 || !strings.Contains(out, "gpu-a takes jobs again") {
		t.Errorf("undrain: %d %q", code, out)
	}
	if _, err := st.Claim(ctx, store.ClaimRequest{AgentID: a.ID, Labels: a.Labels, GPUUUIDs: a.GPUUUIDs, Lease: time.Hour}); err != nil {
		t.Errorf("undrained runner: %v", err)
	}

	// A priced regression: the usage table says what it would have cost.
	if _, err := st.AppendAudit(ctx, store.AuditEntry{Actor: "perfgate", Action: "gate.regression", Repo: "acme/llm",
		Detail: []byte(`{"sha":"abc","tier":"quick","monthly_usd":2887.9}`)}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = run(t, "usage", "--db", db)
	if code != 0 || !strings.Contains(out, "acme/llm") || !strings.Contains(out, "quick") || !strings.Contains(out, "total") || !strings.Contains(out, "baseline reuse only") ||
		!strings.Contains(out, "THEIR COST A MONTH") || strings.Count(out, "+$2,888") != 2 {
		t.Errorf("usage: %d %s %s", code, out, errOut)
	}
	code, out, _ = run(t, "usage", "--json", "--repo", "acme/llm", "--db", db)
	var u struct{ Rows []fleet.UsageRow }
	if code != 0 || json.Unmarshal([]byte(out), &u) != nil || len(u.Rows) != 1 || u.Rows[0].Jobs != 1 {
		t.Errorf("usage --json: %d %s", code, out)
	}
	if code, out, _ := run(t, "usage", "--repo", "acme/none", "--db", db); code != 0 || !strings.Contains(out, "No GPU time recorded") {
		t.Errorf("usage of a repository without jobs: %d %q", code, out)
	}
}

// perfgate runners revoke NAME cuts the runner's token off and frees its
// name; an unknown name exits 1 suggesting the closest.
func TestRunnersRevoke(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "perfgate.db")
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.RegisterAgent(ctx, store.AgentRegistration{Name: "gpu-a", Labels: []string{"gpu"}, TokenHash: store.HashToken("a")}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "runners", "revoke", "gpu-a", "--db", db)
	if code != 0 || !strings.Contains(out, "gpu-a is revoked: its token no longer works") {
		t.Fatalf("revoke: %d %q %q", code, out, errOut)
	}
	if _, err := st.AgentByTokenHash(ctx, store.HashToken("a")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the revoked token still authenticates: %v", err)
	}
	if _, err := st.RegisterAgent(ctx, store.AgentRegistration{Name: "gpu-a", TokenHash: store.HashToken("a2")}); err != nil {
		t.Errorf("the name is not free after revoke: %v", err)
	}
	if code, _, errOut := run(t, "runners", "revoke", "gpu-b", "--db", db); code != 1 || !strings.Contains(errOut, `did you mean "gpu-a"`) {
		t.Errorf("revoke of an unknown name: %d %q", code, errOut)
	}
}
