// Package history writes a synthetic default-branch history into a store
// through its public API — nightly jobs with measured runs, trend points,
// judged check runs, baselines and a release — so the dashboard and the
// change-point pass have something to show: `perfgate demo --serve` uses
// it, and so do the dashboard's tests and benchmarks. The runs are
// generated, not measured; every other row is what the server itself
// would have written for them.
package history

import (
	"context"
	"crypto/sha1" //nolint:gosec // names fake commits (git's own hash), no security
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/cost"
	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/github/baseline"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// Spec is the history to write.
type Spec struct {
	Repo string
	// Cells are the nightly matrix cells ("c=1", "c=64"); each gets the
	// trend key "nightly/<cell>".
	Cells []string
	Days  int
	// End is the last night (default: the store clock's today).
	End time.Time
	// StepDay is the night (0-based) from which the engine is slower by
	// Step (0.08 = TPOT and TTFT 8% up, throughput down accordingly);
	// negative for no step.
	StepDay int
	Step    float64
	// Noise is the night-to-night relative noise of a run's level.
	Noise float64
	// Requests per run and runs per night (defaults 100 and 5).
	Requests, Runs int
	// ReleaseDay, when ≥ 0, publishes release ReleaseTag on that night's commit.
	ReleaseDay int
	ReleaseTag string
	// InstallationID is the app installation the jobs record.
	InstallationID int64
	Seed           uint64
	// Commits, when set, are the nights' commits (night d measured
	// Commits[d]; at least Days of them): a history seeded into a real
	// repository, whose change points can be bisected. Otherwise each
	// night gets a made-up SHA (Commit).
	Commits []string
	// Price, when set, is the repository's declared GPU price, kept in
	// each job's snapshot as the dispatcher keeps it (the nightly pass
	// prices change points from it).
	Price *cost.Price
}

// Night is one seeded night of one cell.
type Night struct {
	Day    time.Time
	Cell   string
	SHA    string
	JobID  int64
	Values map[string]float64 // trend values per metric
}

// seedLabel keeps seeded jobs away from real agents: no agent has it.
const seedLabel = "perfgate-history-seed"

// Seed writes the history and returns the nights it wrote.
func Seed(ctx context.Context, st store.Store, s Spec) ([]Night, error) {
	if s.Requests <= 0 {
		s.Requests = 100
	}
	if s.Runs <= 0 {
		s.Runs = 5
	}
	if s.End.IsZero() {
		s.End = time.Now().UTC()
	}
	end := s.End.UTC().Truncate(24 * time.Hour)
	tier, err := config.Default().Tier("nightly")
	if err != nil {
		return nil, err
	}
	// The runner this history pretends to have shifts from night to night
	// by Noise: say so, as a repository's config would (session_noise).
	tier.SessionNoise = config.Percent(s.Noise)
	if len(s.Commits) > 0 && len(s.Commits) < s.Days {
		return nil, fmt.Errorf("seed history: %d commits for %d nights", len(s.Commits), s.Days)
	}
	rng := rand.New(rand.NewPCG(s.Seed, 7))
	var nights []Night
	for d := 0; d < s.Days; d++ {
		day := end.AddDate(0, 0, d-s.Days+1)
		sha := Commit(s.Repo, d)
		if d < len(s.Commits) {
			sha = s.Commits[d]
		}
		slow := 1.0
		if s.StepDay >= 0 && d >= s.StepDay {
			slow += s.Step
		}
		level := 1 + s.Noise*rng.NormFloat64()
		var jobIDs []int64
		var reps []*gate.Report
		var env *result.Environment
		for ci, cell := range s.Cells {
			key := "nightly/" + cell
			conc := cellConcurrency(cell, ci)
			runs := make([]*result.Result, s.Runs)
			for i := range runs {
				runs[i] = Run(rng, sha, conc, s.Requests, slow*level*(1+0.003*rng.NormFloat64()))
			}
			job, err := storeJob(ctx, st, s.Repo, s.InstallationID, sha, cell, s.Price, runs)
			if err != nil {
				return nil, err
			}
			jobIDs = append(jobIDs, job.ID)
			env = &runs[0].Perfgate.Environment
			n := Night{Day: day, Cell: cell, SHA: sha, JobID: job.ID, Values: map[string]float64{}}
			for _, m := range append(tier.GatedMetrics(), tier.SecondaryMetrics()...) {
				v, ok := gate.MedianOf(runs, m)
				if !ok {
					continue
				}
				n.Values[m] = v
				if err := st.PutTrend(ctx, store.TrendPoint{Repo: s.Repo, Key: key, Metric: m, Date: day.Add(3 * time.Hour), Value: v, JobID: job.ID}); err != nil {
					return nil, err
				}
			}
			nights = append(nights, n)
			snap, err := baseline.Latest(ctx, st, s.Repo, key)
			if err != nil {
				meta := baseline.Meta{Repo: s.Repo, Key: key, Version: "nightly-" + sha[:7], Commit: sha, By: "perfgate", Reason: "first nightly of this matrix cell"}
				if _, _, err := baseline.Promote(ctx, st, runs, meta, tier); err != nil {
					return nil, fmt.Errorf("seed baseline %s: %w", key, err)
				}
				continue
			}
			rep, err := gate.Compare(snap.Runs, runs, tier, gate.Options{})
			if err != nil {
				return nil, err
			}
			for i := range rep.Metrics {
				rep.Metrics[i].Metric = cell + " " + rep.Metrics[i].Metric
			}
			reps = append(reps, rep)
		}
		if err := storeCheck(ctx, st, s.Repo, sha, jobIDs, reps, env); err != nil {
			return nil, err
		}
		if d == s.ReleaseDay && s.ReleaseTag != "" {
			detail, err := json.Marshal(map[string]any{"tag": s.ReleaseTag, "commit": sha, "promoted": false, "why": "seeded history"})
			if err != nil {
				return nil, fmt.Errorf("encode release audit: %w", err)
			}
			if _, err := st.AppendAudit(ctx, store.AuditEntry{Actor: "perfgate", Action: "release.published", Repo: s.Repo, Detail: detail}); err != nil {
				return nil, err
			}
		}
	}
	return nights, nil
}

// Commit is the seeded history's commit of night d.
func Commit(repo string, d int) string {
	sum := sha1.Sum([]byte(fmt.Sprintf("%s night %d", repo, d))) //nolint:gosec // a seeded commit name, as git's are sha1
	return hex.EncodeToString(sum[:])
}

func cellConcurrency(cell string, i int) int {
	var c int
	if _, err := fmt.Sscanf(cell, "c=%d", &c); err == nil && c > 0 {
		return c
	}
	return 1 << (2 * i)
}

// storeJob records a finished nightly job with its measured runs, the way
// the agent API would.
func storeJob(ctx context.Context, st store.Store, repo string, installation int64, sha, cell string, price *cost.Price, runs []*result.Result) (store.Job, error) {
	fields := map[string]any{"tier": "nightly", "repo": repo, "head_sha": sha, "cell": cell}
	if price != nil {
		fields["price"] = price
	}
	snap, err := json.Marshal(fields)
	if err != nil {
		return store.Job{}, err
	}
	if _, err := st.Enqueue(ctx, store.JobSpec{Tier: "nightly", Kind: "nightly", Repo: repo, InstallationID: installation, HeadSHA: sha, BaseSHA: sha,
		Config: snap, Labels: []string{seedLabel}}); err != nil {
		return store.Job{}, err
	}
	job, err := st.Claim(ctx, store.ClaimRequest{Labels: []string{seedLabel}, Lease: time.Minute})
	if err != nil {
		return store.Job{}, fmt.Errorf("claim seeded job: %w", err)
	}
	for i, r := range runs {
		raw, err := json.Marshal(r)
		if err != nil {
			return store.Job{}, err
		}
		env, err := json.Marshal(r.Perfgate.Environment)
		if err != nil {
			return store.Job{}, err
		}
		if _, _, err := st.PutResult(ctx, store.ResultUpload{JobID: job.ID, LeaseID: job.LeaseID, IdempotencyKey: fmt.Sprintf("seed-%d", i),
			RunIndex: i, Kind: jobstate.KindMeasured, GPUUUID: r.Perfgate.Environment.GPUUUID, Environment: env, Samples: raw}); err != nil {
			return store.Job{}, err
		}
	}
	logText := fmt.Sprintf("perfgate agent: job %d, commit %s, cell %s\nengine started (simulated)\nwarm-up done\n", job.ID, sha[:7], cell)
	for i := range runs {
		logText += fmt.Sprintf("run %d/%d: %d requests, output %.1f tok/s\n", i+1, len(runs), runs[i].Completed, runs[i].OutputThroughput)
	}
	if _, err := st.AppendLog(ctx, job.ID, job.LeaseID, 0, []byte(logText)); err != nil {
		return store.Job{}, err
	}
	return st.Finish(ctx, job.ID, job.LeaseID, jobstate.Succeeded, "")
}

// storeCheck records the night's check run with the verdict of all cells.
func storeCheck(ctx context.Context, st store.Store, repo, sha string, jobIDs []int64, reps []*gate.Report, env *result.Environment) error {
	merged := &gate.Report{Tier: "nightly", Verdict: gate.Pass}
	for _, r := range reps {
		if r.Verdict == gate.Regression || (r.Verdict == gate.Inconclusive && merged.Verdict == gate.Pass) {
			merged.Verdict = r.Verdict
		}
		merged.Metrics = append(merged.Metrics, r.Metrics...)
		merged.BaselineRuns, merged.CandidateRuns, merged.Confidence = r.BaselineRuns, r.CandidateRuns, r.Confidence
	}
	state := store.CheckPassed
	switch {
	case len(reps) == 0:
		merged.Notes = []string{"first nightly: promoted as each cell's baseline"}
	case merged.Verdict == gate.Regression:
		state = store.CheckWarned
	case merged.Verdict == gate.Inconclusive:
		state = store.CheckInconclusive
	}
	doc, err := json.Marshal(map[string]any{"report": merged, "environment": env})
	if err != nil {
		return fmt.Errorf("seed verdict: %w", err)
	}
	_, err = st.PutCheckRun(ctx, store.CheckRun{Repo: repo, HeadSHA: sha, Tier: "nightly", JobIDs: jobIDs, State: state, Verdict: doc})
	if err != nil {
		return err
	}
	detail, err := json.Marshal(map[string]any{"sha": sha, "tier": "nightly", "verdict": merged.Verdict})
	if err != nil {
		return fmt.Errorf("encode verdict audit: %w", err)
	}
	_, err = st.AppendAudit(ctx, store.AuditEntry{Actor: "perfgate", Action: "gate." + string(merged.Verdict), Repo: repo, Detail: detail})
	return err
}

// Run generates one measured run of the simulated engine at concurrency
// conc whose latencies are scaled by slow.
func Run(rng *rand.Rand, sha string, conc, n int, slow float64) *result.Result {
	r := &result.Result{Backend: "openai", ModelID: "perfgate-sim", NumPrompts: n, RequestRate: result.Inf, Completed: n}
	mc := conc
	r.MaxConcurrency = &mc
	base := 1 + math.Log2(float64(conc))/4 // more concurrency, slower tokens
	pg := &result.Section{SchemaVersion: result.SchemaVersion, Tool: "perfgate history", DatasetHash: "seeded",
		Environment: result.Environment{GPUName: "NVIDIA A100-SXM4-80GB", GPUUUID: "GPU-5f2c0d1e-demo-0000-0000-000000000000",
			GPUCount: 1, Driver: "550.54.15", CUDA: "12.4", Sim: true, Commit: sha, EngineVersion: "sim"},
		Load: result.Load{Endpoint: "/v1/completions", Model: "perfgate-sim", Dataset: "random", NumPrompts: n, InputLen: 256, OutputLen: 64,
			RequestRate: result.Inf, Burstiness: 1, MaxConcurrency: conc},
		GPU: &result.GPUSummary{Available: true, Samples: 150, IntervalMS: 200, Valid: true,
			Series: map[string]result.Aggregate{
				"util_pct":     {Mean: 88 + rng.Float64()*4, Max: 100, P95: 99},
				"mem_used_mib": {Mean: 61000, Max: 61440 + rng.Float64()*50, P95: 61400},
				"power_w":      {Mean: 300 + 10*rng.Float64(), Max: 380, P95: 365},
				"temp_c":       {Mean: 62, Max: 68, P95: 67},
			}},
	}
	var dur float64
	outTok := 0
	for i := 0; i < n; i++ {
		ttft := 0.040 * base * slow * math.Exp(0.25*rng.NormFloat64())
		tpot := 12.0 * base * slow * math.Exp(0.08*rng.NormFloat64()) // ms
		toks := 64
		e2el := ttft*1000 + tpot*float64(toks-1)
		r.TTFTs = append(r.TTFTs, ttft)
		gaps := make([]float64, 4) // a few inter-token gaps: enough for ITL statistics, small to store
		for g := range gaps {
			gaps[g] = tpot / 1000 * math.Exp(0.05*rng.NormFloat64())
		}
		r.ITLs = append(r.ITLs, gaps)
		r.Errors = append(r.Errors, "")
		r.InputLens, r.OutputLens = append(r.InputLens, 256), append(r.OutputLens, toks)
		pg.TPOTs, pg.E2ELs = append(pg.TPOTs, tpot), append(pg.E2ELs, e2el)
		outTok += toks
		dur += e2el / 1000 / float64(conc)
	}
	r.Duration = dur
	r.TotalInputTokens, r.TotalOutputTokens = 256*n, outTok
	r.OutputThroughput = float64(outTok) / dur
	r.RequestThroughput = float64(n) / dur
	r.TotalTokenThroughput = float64(outTok+256*n) / dur
	r.Perfgate = pg
	return r
}
