//go:build linux && cgo && nvml

// Package cardcheck is the one check that needs a real NVIDIA card: a
// runner agent with the real NVML provider measures a job (the built-in
// simulated engine, in process) on the card, and the result must carry the
// card's fingerprint, its clocks and NVML telemetry. Without a driver the
// test skips; with one it writes what it saw to $PERFGATE_CARD_REPORT.
//
//	go test -c -tags nvml -o cardcheck.test ./internal/runner/gpu/cardcheck
//	./cardcheck.test -test.v   # on the GPU host
package cardcheck

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/agentserver"
	"github.com/perfgate/perfgate/internal/runner/agent"
	"github.com/perfgate/perfgate/internal/runner/gpu"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

const regToken = "card-check"

func TestAgentOnRealCard(t *testing.T) {
	log := zerolog.New(zerolog.NewTestWriter(t))
	var p gpu.Provider
	var err error
	if os.Getenv("PERFGATE_CARD_FAKE") != "" {
		// Checks this test itself on a host without a card.
		p = gpu.NewFakeProvider(gpu.NewFake("GPU-00000000-card-check-fake-000000000000"))
	} else if p, err = gpu.OpenNVML(log); err != nil {
		t.Skipf("no NVML on this host: %v", err)
	}
	defer p.Close()
	infos, err := p.List()
	if err != nil || len(infos) == 0 {
		t.Fatalf("NVML opened but lists no card: %v", err)
	}
	card := infos[0]
	t.Logf("card: %+v", card)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv := httptest.NewServer(agentserver.NewServer(st, agentserver.Options{RegistrationToken: regToken,
		Lease: 30 * time.Second, LongPoll: 2 * time.Second}))
	defer srv.Close()
	go agentserver.RunReaper(ctx, st, time.Second, nil, zerolog.Nop())

	c, err := agentapi.NewClient(agentapi.ClientConfig{Server: srv.URL, RegistrationToken: regToken,
		Name: "card-check", Labels: []string{"gpu"}, GPUUUIDs: []string{card.UUID}})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := c.Register(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{Server: srv.URL, Token: reg.Token, Name: "card-check", Labels: []string{"gpu"},
		GPU: p, GPUs: []string{card.UUID}, Log: log, WorkDir: t.TempDir(), CacheDir: t.TempDir(), ClaimWait: time.Second, SampleInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	actx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); a.Run(actx) }()
	defer func() { stop(); <-done }()

	sim := agentapi.SimEngine{}
	plan := agentapi.Plan{Version: agentapi.PlanVersion, Tier: "quick", Repo: "o/r", HeadSHA: "cafe000000000000000000000000000000000001",
		Engine: agentapi.Engine{Sim: &sim, Model: "perfgate-sim", StartTimeout: agentapi.Duration(30 * time.Second)},
		Workload: agentapi.Workload{Endpoint: "/v1/completions", InputLen: 128, OutputLen: 32, NumPrompts: 200,
			RequestRate: result.Rate(0), MaxConcurrency: 16, Seed: 1},
		Warmup: 20, Repeats: 3}
	b, _ := json.Marshal(plan)
	job, err := st.Enqueue(ctx, store.JobSpec{Tier: "quick", Kind: "pull_request", Repo: "o/r", PRNumber: 1,
		HeadSHA: plan.HeadSHA, Config: b, Labels: []string{"gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		j, err := st.GetJob(ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.Status == jobstate.Succeeded {
			break
		}
		if j.Status == jobstate.Failed || j.Status == jobstate.Cancelled {
			t.Fatalf("job %s: %s", j.Status, j.FailureReason)
		}
		select {
		case <-ctx.Done():
			t.Fatal("job did not finish")
		case <-time.After(250 * time.Millisecond):
		}
	}
	rows, err := st.ListResults(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	report := map[string]any{"card": card}
	var runs []any
	for _, r := range rows {
		if r.Kind != jobstate.KindMeasured {
			continue
		}
		res, err := result.Parse(r.Samples)
		if err != nil {
			t.Fatal(err)
		}
		env := res.Perfgate.Environment
		if env.GPUUUID != card.UUID || env.Driver == "" || env.SMClockMHz == 0 {
			t.Errorf("run %d environment lacks the card: uuid %q driver %q sm clock %d", r.RunIndex, env.GPUUUID, env.Driver, env.SMClockMHz)
		}
		if res.Perfgate.GPU == nil || res.Perfgate.GPU.Samples == 0 {
			t.Errorf("run %d has no NVML telemetry", r.RunIndex)
		}
		runs = append(runs, map[string]any{"run": r.RunIndex, "environment": env, "gpu": res.Perfgate.GPU})
	}
	if len(runs) != 3 {
		t.Errorf("%d measured runs, want 3", len(runs))
	}
	report["runs"] = runs
	out, _ := json.MarshalIndent(report, "", "  ")
	t.Logf("%s", out)
	if path := os.Getenv("PERFGATE_CARD_REPORT"); path != "" {
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
