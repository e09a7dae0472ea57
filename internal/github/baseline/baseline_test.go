package baseline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

const (
	testRepo   = "acme/inference"
	testKey    = "llama-8b-tp8"
	testCommit = "3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39"
	testImage  = "vllm/vllm-openai@sha256:6f1c0d8e2b4a79e3c5d1f0a2b4c6d8e0f1a3b5c7d9e1f3a5b7c9d1e3f5a7b9c1"
)

// baseValues are one run's medians of the merge tier's gated metrics.
var baseValues = map[string]float64{
	"p99_tpot_ms": 12.0, "p90_tpot_ms": 11.0, "median_tpot_ms": 10.0, "p99_ttft_ms": 250, "p90_ttft_ms": 200, "median_ttft_ms": 120,
	"p99_itl_ms": 15, "median_itl_ms": 9.5, "p99_e2el_ms": 1500, "output_throughput": 5000, "request_throughput": 40,
}

// makeRuns builds n runs of one environment with seeded run-to-run noise
// of coefficient cv; scale multiplies chosen metrics (1.1 = 10% higher).
func makeRuns(n int, seed uint64, cv float64, scale map[string]float64) []*result.Result {
	return makeSession(n, seed, cv, 0, scale)
}

// makeSession is makeRuns in one session whose shift, of coefficient
// sessionCV, every run shares.
func makeSession(n int, seed uint64, cv, sessionCV float64, scale map[string]float64) []*result.Result {
	rng := rand.New(rand.NewPCG(seed, 42))
	shift := sessionCV * rng.NormFloat64()
	out := make([]*result.Result, n)
	for i := range out {
		conc := 64
		r := &result.Result{
			ModelID: "meta-llama/Llama-3.1-8B-Instruct", NumPrompts: 1000, RequestRate: result.Inf, Burstiness: 1, MaxConcurrency: &conc,
			Completed: 1000, Duration: 25, Metrics: map[string]float64{},
			Perfgate: &result.Section{
				SchemaVersion: result.SchemaVersion, Tool: "perfgate bench dev",
				Environment: result.Environment{
					GPUName: "NVIDIA H100 80GB HBM3", GPUUUID: "GPU-5f3e2d1c-0b9a-8f7e-6d5c-4b3a2f1e0d9c", GPUCount: 8,
					Driver: "550.54.15", CUDA: "12.4", EngineImage: testImage,
				},
				Load: result.Load{Endpoint: "/v1/completions", Model: "meta-llama/Llama-3.1-8B-Instruct", Dataset: "random",
					NumPrompts: 1000, InputLen: 1024, OutputLen: 128, RequestRate: result.Inf, Burstiness: 1, MaxConcurrency: 64},
				DatasetHash: "9b1d4c7e0f2a5b8c1d4e7f0a3b6c9d2e5f8a1b4c7d0e3f6a9b2c5d8e1f4a7b0c",
				Warmup:      500,
			},
		}
		for _, k := range baseKeys {
			v := baseValues[k] * math.Exp(cv*rng.NormFloat64()+shift)
			if k == "output_throughput" || k == "request_throughput" {
				v = baseValues[k] * math.Exp(cv*rng.NormFloat64()-shift)
			}
			if s, ok := scale[k]; ok {
				v *= s
			}
			switch k {
			case "output_throughput":
				r.OutputThroughput = v
			case "request_throughput":
				r.RequestThroughput = v
			default:
				r.Metrics[k] = v
			}
		}
		out[i] = r
	}
	return out
}

// baseKeys orders baseValues so a seed always draws the same runs.
var baseKeys = func() []string {
	var ks []string
	for k := range baseValues {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}()

func openStore(t *testing.T) store.Store {
	t.Helper()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "db.sqlite"), store.WithClock(func() time.Time {
		at = at.Add(time.Minute)
		return at
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func mergeTier(t *testing.T) config.Tier {
	t.Helper()
	tier, err := config.Default().Tier("merge")
	if err != nil {
		t.Fatal(err)
	}
	return tier
}

func meta(version string) Meta {
	return Meta{Repo: testRepo, Key: testKey, Version: version, Commit: testCommit, By: "octocat", Reason: "release " + version}
}

func refusal(t *testing.T, err error, rule string) *RefusedError {
	t.Helper()
	var re *RefusedError
	if !errors.As(err, &re) || re.Rule != rule {
		t.Fatalf("err = %v, want a refusal by %q", err, rule)
	}
	return re
}

// stableTier is the merge tier on a runner whose session-to-session shift
// is known to be small (session_noise 0.3%): the ratchet can then see
// losses inside the PR threshold.
func stableTier(t *testing.T) config.Tier {
	tier := mergeTier(t)
	tier.SessionNoise = 0.003
	return tier
}

// Rule 1, a baseline only moves up: first promotion, better runs, a
// noise-level re-run, and every kind of worse.
func TestPromoteOnlyMovesUp(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		cv    float64
		scale map[string]float64
		worse []string // metrics that must refuse; nil = accepted
	}{
		{"better", 0.01, map[string]float64{"median_tpot_ms": 0.9, "output_throughput": 1.1}, nil},
		{"unchanged re-run", 0.01, nil, nil},
		{"latency regression", 0.01, map[string]float64{"median_tpot_ms": 1.10}, []string{"tpot_median"}},
		// Lower throughput is worse: the direction, not the sign, decides.
		{"throughput regression", 0.01, map[string]float64{"output_throughput": 0.9, "request_throughput": 0.9}, []string{"output_throughput"}},
		// Inside the 5% PR threshold but real: the ratchet the strict rule stops.
		{"sub-threshold loss", 0.001, map[string]float64{"median_tpot_ms": 1.02}, []string{"tpot_median"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, st, tier := context.Background(), openStore(t), stableTier(t)
			first, rep, err := Promote(ctx, st, makeRuns(5, 1, tc.cv, nil), meta("v0.25.0"), tier)
			if err != nil || rep != nil || first.Version != 1 {
				t.Fatalf("first promotion = #%d, report %v, %v", first.Version, rep, err)
			}
			b, rep, err := Promote(ctx, st, makeRuns(5, uint64(100+i), tc.cv, tc.scale), meta("v0.26.0"), tier)
			if tc.worse == nil {
				if err != nil || b.Version != 2 || b.AllowLower {
					t.Fatalf("promotion = #%d lower=%v, %v", b.Version, b.AllowLower, err)
				}
				return
			}
			re := refusal(t, err, RuleMovesUp)
			var got []string
			for _, w := range re.Worse {
				got = append(got, w.Metric)
			}
			if strings.Join(got, ",") != strings.Join(tc.worse, ",") {
				t.Errorf("worse = %v, want %v", got, tc.worse)
			}
			msg := err.Error()
			for _, want := range append(tc.worse, "--allow-lower --reason", "baseline #1") {
				if !strings.Contains(msg, want) {
					t.Errorf("message lacks %q: %s", want, msg)
				}
			}
			if rep == nil {
				t.Error("refusal without the comparison report")
			}
			if tc.name == "sub-threshold loss" {
				// The gate alone would pass this: only the strict rule refuses it.
				for _, m := range rep.Metrics {
					if m.Metric == "tpot_median" && m.Verdict == gate.MetricRegression {
						t.Errorf("tpot_median +2%% is a gate regression (%+v): the case no longer tests the strict rule", m)
					}
				}
			}
			if latest, err := st.LatestBaseline(ctx, testRepo, testKey); err != nil || latest.Version != 1 {
				t.Errorf("after refusal latest = #%d, %v; want #1", latest.Version, err)
			}
		})
	}
}

// The ratchet compares with the median of the latest three baselines, so
// one lucky baseline does not raise the bar: with #1 and #2 at the level
// and #3 4% faster by a session's luck, the reference is the level.
func TestRatchetRollingMedian(t *testing.T) {
	t.Parallel()
	ctx, st, tier := context.Background(), openStore(t), stableTier(t)
	for i, scale := range []map[string]float64{nil, nil, {"median_tpot_ms": 0.96}} {
		m := meta(fmt.Sprintf("v0.%d.0", 20+i))
		m.AllowLower, m.Reason = true, "test history"
		if _, _, err := Promote(ctx, st, makeRuns(5, uint64(10+i), 0.002, scale), m, tier); err != nil {
			t.Fatal(err)
		}
	}
	m := meta("v0.30.0")
	m.AllowLower, m.Reason = true, "test"
	_, rep, err := Promote(ctx, st, makeRuns(5, 20, 0.002, nil), m, tier)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Design != gate.DesignRecent || rep.HistorySessions != 3 || !strings.Contains(strings.Join(rep.Notes, " "), "median of the 3 latest baselines") {
		t.Errorf("design %s, %d history sessions, notes %v", rep.Design, rep.HistorySessions, rep.Notes)
	}
	for _, mr := range rep.Metrics {
		if mr.Metric == "tpot_median" && (math.Abs(mr.Baseline/10-1) > 0.01 || math.Abs(mr.Estimate) > 0.01) {
			t.Errorf("tpot_median reference %.3f (estimate %+.3f): want the level 10, not the lucky latest 9.6", mr.Baseline, mr.Estimate)
		}
	}
}

// Unchanged code measured in another session is not refused for that
// session's shift: with 2% session-to-session shifts and the default
// session_noise, at most a few percent of promotions are refused (the
// rule before session noise refused 19%).
func TestRatchetSessionShifts(t *testing.T) {
	t.Parallel()
	tier := mergeTier(t)
	const trials = 200
	refused, refusedOld := 0, 0
	for i := 0; i < trials; i++ {
		var sessions []gate.Session
		for h := 0; h < 4; h++ {
			sessions = append(sessions, gate.Session{Label: fmt.Sprint(h), Runs: makeSession(5, uint64(1000*i+h), 0.01, 0.02, nil)})
		}
		runs := makeSession(5, uint64(1000*i+999), 0.01, 0.02, nil)
		rep, err := gate.CompareRecent(runs, tier, gate.Options{Looks: gate.SingleLook(), History: gate.History{Sessions: sessions}})
		if err != nil {
			t.Fatal(err)
		}
		if len(worseMetrics(rep)) > 0 {
			refused++
		}
		// The old rule: the latest baseline alone, no session term.
		old := tier
		old.SessionNoise = 0
		rep, err = gate.CompareRecent(runs, old, gate.Options{Looks: gate.SingleLook(), Recent: 1, History: gate.History{Sessions: sessions[:1]}})
		if err != nil {
			t.Fatal(err)
		}
		if len(worseMetrics(rep)) > 0 {
			refusedOld++
		}
	}
	t.Logf("refused %d, old rule %d of %d", refused, refusedOld, trials)
	if refused > trials/50 {
		t.Errorf("%d of %d unchanged-code promotions refused across 2%% session shifts; want at most 2%%", refused, trials)
	}
	if refusedOld < trials/10 {
		t.Errorf("without the session term %d of %d were refused: the case no longer shows the session shift", refusedOld, trials)
	}
}

// An allowed lowering needs a reason and is recorded with who and why.
func TestPromoteAllowLower(t *testing.T) {
	t.Parallel()
	ctx, st, tier := context.Background(), openStore(t), stableTier(t)
	if _, _, err := Promote(ctx, st, makeRuns(5, 1, 0.01, nil), meta("v0.25.0"), tier); err != nil {
		t.Fatal(err)
	}
	worse := makeRuns(5, 2, 0.01, map[string]float64{"median_tpot_ms": 1.12})

	m := meta("v0.26.0")
	m.AllowLower, m.Reason = true, "  "
	if re := refusal(t, firstErr(Promote(ctx, st, worse, m, tier)), RuleMovesUp); !re.NeedReason {
		t.Errorf("blank reason: NeedReason false: %v", re)
	}

	m.By, m.Reason = "release-captain", "v0.26.0 trades tpot for a 2x longer context; accepted in #812"
	b, _, err := Promote(ctx, st, worse, m, tier)
	if err != nil {
		t.Fatal(err)
	}
	if b.Version != 2 || !b.AllowLower || b.Reason != m.Reason || b.PromotedBy != "release-captain" {
		t.Errorf("stored = #%d allow_lower=%v reason=%q by=%q", b.Version, b.AllowLower, b.Reason, b.PromotedBy)
	}
	entries, err := st.ListAudit(ctx, testRepo, 0)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	var lowered store.AuditEntry
	for _, e := range entries {
		actions = append(actions, e.Actor+":"+e.Action)
		if e.Action == ActionLowered {
			lowered = e
		}
	}
	want := "octocat:baseline.promoted release-captain:baseline.promoted release-captain:baseline.lowered"
	if strings.Join(actions, " ") != want {
		t.Errorf("audit = %v, want %s", actions, want)
	}
	var detail struct {
		Reason string  `json:"reason"`
		Worse  []Worse `json:"worse"`
		Prev   int     `json:"previous_version"`
	}
	if err := json.Unmarshal(lowered.Detail, &detail); err != nil || detail.Reason != m.Reason || detail.Prev != 1 ||
		len(detail.Worse) != 1 || detail.Worse[0].Metric != "tpot_median" || detail.Worse[0].Delta < 0.08 {
		t.Errorf("lowered detail = %s (%v)", lowered.Detail, err)
	}

	// --allow-lower on runs that are not lower records no lowering.
	m.Version = "v0.27.0"
	b, _, err = Promote(ctx, st, makeRuns(5, 3, 0.01, map[string]float64{"median_tpot_ms": 1.12}), m, tier)
	if err != nil || b.AllowLower {
		t.Errorf("not lower with --allow-lower: allow_lower=%v, %v", b.AllowLower, err)
	}
}

func firstErr(_ store.Baseline, _ *gate.Report, err error) error { return err }

// Rule 2, every baseline is traceable: each missing or inconsistent field
// refuses, and nothing is stored.
func TestPromoteTraceable(t *testing.T) {
	t.Parallel()
	type mut func(rs []*result.Result, m *Meta) []*result.Result
	each := func(f func(r *result.Result)) mut {
		return func(rs []*result.Result, _ *Meta) []*result.Result {
			for _, r := range rs {
				f(r)
			}
			return rs
		}
	}
	one := func(i int, f func(r *result.Result)) mut {
		return func(rs []*result.Result, _ *Meta) []*result.Result { f(rs[i]); return rs }
	}
	cases := []struct {
		name string
		mut  mut
		want string // "" = accepted
	}{
		{"complete", each(func(*result.Result) {}), ""},
		{"commit from the runs", func(rs []*result.Result, m *Meta) []*result.Result {
			m.Commit = ""
			for _, r := range rs {
				r.Perfgate.Environment.Commit = testCommit
			}
			return rs
		}, ""},
		{"sim needs no driver or image", each(func(r *result.Result) {
			r.Perfgate.Environment.Sim, r.Perfgate.Environment.Driver, r.Perfgate.Environment.EngineImage = true, "", ""
		}), ""},
		{"no commit", func(rs []*result.Result, m *Meta) []*result.Result { m.Commit = ""; return rs }, "no commit"},
		{"commit not a SHA", func(rs []*result.Result, m *Meta) []*result.Result { m.Commit = "main"; return rs }, "not a git SHA"},
		{"run at another commit", one(1, func(r *result.Result) { r.Perfgate.Environment.Commit = "0123456789abcdef" }), "measured at commit 0123456789abcdef"},
		{"runs at two commits", func(rs []*result.Result, m *Meta) []*result.Result {
			m.Commit = ""
			rs[0].Perfgate.Environment.Commit, rs[1].Perfgate.Environment.Commit = "aaaaaaa1", "bbbbbbb2"
			return rs
		}, "different commits"},
		{"image by tag", each(func(r *result.Result) { r.Perfgate.Environment.EngineImage = "vllm/vllm-openai:v0.6.3" }), "engine identity"},
		{"no image", each(func(r *result.Result) { r.Perfgate.Environment.EngineImage = "" }), "engine identity"},
		{"command engine from the commit's checkout", each(func(r *result.Result) {
			e := &r.Perfgate.Environment
			e.EngineImage, e.Commit, e.SourceTree, e.Sandbox = "perfgate sim --config {{.Workdir}}/inference_engine/sim.yaml --port {{.Port}}", testCommit, "sha256:"+strings.Repeat("1", 64), "uncontained"
		}), ""},
		{"command engine without its tree", each(func(r *result.Result) {
			r.Perfgate.Environment.EngineImage, r.Perfgate.Environment.Commit = "vllm serve {{.Model}}", testCommit
		}), "engine identity"},
		{"image built from the commit", each(func(r *result.Result) {
			r.Perfgate.Environment.EngineImage, r.Perfgate.Environment.EngineBuild = "vllm/vllm-openai:v0.6.3", "sha256:"+strings.Repeat("2", 64)
		}), ""},
		{"no GPU name", each(func(r *result.Result) { r.Perfgate.Environment.GPUName = "" }), "no GPU name"},
		{"no GPU UUID", one(2, func(r *result.Result) { r.Perfgate.Environment.GPUUUID = "" }), "no GPU UUID (environment.gpu_uuid) in run 3"},
		{"sim without GPU UUID", each(func(r *result.Result) {
			r.Perfgate.Environment.Sim, r.Perfgate.Environment.GPUUUID = true, ""
		}), "no GPU UUID"},
		{"no driver", each(func(r *result.Result) { r.Perfgate.Environment.Driver = "" }), "no driver version (environment.driver_version) in any run"},
		{"plain vLLM result", one(0, func(r *result.Result) { r.Perfgate = nil }), "perfgate's section"},
		{"no model", each(func(r *result.Result) { r.Perfgate.Load.Model = "" }), "no load.model"},
		{"no prompts", each(func(r *result.Result) { r.Perfgate.Load.NumPrompts = 0 }), "no load.num_prompts"},
		{"no rate", each(func(r *result.Result) { r.Perfgate.Load.RequestRate = 0 }), "no load.request_rate"},
		{"no endpoint", each(func(r *result.Result) { r.Perfgate.Load.Endpoint = "" }), "no load.endpoint"},
		{"no dataset hash", each(func(r *result.Result) { r.Perfgate.DatasetHash = "" }), "no dataset hash"},
		{"two runs", func(rs []*result.Result, _ *Meta) []*result.Result { return rs[:2] }, "at least 3"},
		{"mixed drivers", one(1, func(r *result.Result) { r.Perfgate.Environment.Driver = "535.104.05" }), "disagree on driver_version"},
		{"mixed GPUs", one(4, func(r *result.Result) { r.Perfgate.Environment.GPUUUID = "GPU-other" }), "disagree on gpu_uuid"},
		{"mixed load", one(3, func(r *result.Result) { r.Perfgate.Load.MaxConcurrency = 32 }), "disagree on load.max_concurrency"},
		{"mixed datasets", one(0, func(r *result.Result) { r.Perfgate.DatasetHash = "sha256:other" }), "disagree on dataset_hash"},
		{"throttled run", one(2, func(r *result.Result) {
			r.Perfgate.GPU = &result.GPUSummary{Available: true, Valid: false, Invalid: []string{"thermal throttling"}}
		}), "untrustworthy run 3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, st := context.Background(), openStore(t)
			m := meta("v0.26.0")
			runs := tc.mut(makeRuns(5, 1, 0.01, nil), &m)
			b, _, err := Promote(ctx, st, runs, m, mergeTier(t))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				s, err := Latest(ctx, st, testRepo, testKey)
				if err != nil || s.Commit != testCommit || s.GPUUUID == "" || s.Label != "v0.26.0" || len(s.Runs) != 5 {
					t.Errorf("stored = %+v, %v", s.Baseline, err)
				}
				if want := engineIdentity(runs[0].Perfgate.Environment); s.ImageDigest != want || want == "" {
					t.Errorf("image digest = %q, want %q", s.ImageDigest, want)
				}
				return
			}
			re := refusal(t, err, RuleTraceable)
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("message lacks %q: %v", tc.want, re)
			}
			if b.ID != 0 {
				t.Errorf("refused baseline stored: %+v", b)
			}
			if _, err := st.LatestBaseline(ctx, testRepo, testKey); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("refused baseline stored: %v", err)
			}
		})
	}
}

func TestPromoteMeta(t *testing.T) {
	t.Parallel()
	ctx, st, tier := context.Background(), openStore(t), mergeTier(t)
	runs := makeRuns(5, 1, 0.01, nil)
	for _, m := range []Meta{
		{Repo: testRepo, Key: testKey, Version: "v1", Commit: testCommit},                      // no by
		{Repo: "inference", Key: testKey, Version: "v1", Commit: testCommit, By: "x"},          // not owner/name
		{Repo: testRepo, Key: "", Version: "v1", Commit: testCommit, By: "x"},                  // no key
		{Repo: testRepo, Key: testKey, Version: "v 1", Commit: testCommit, By: "x"},            // spaces
		{Repo: testRepo, Key: testKey, Version: "", Commit: testCommit, By: "x"},               // no version
		{Repo: testRepo, Key: testKey, Version: "../etc", Commit: testCommit, By: "x"},         // a path
		{Repo: testRepo, Key: testKey, Version: "v1", Commit: testCommit, By: "x", Reason: ""}, // valid: control
	} {
		_, _, err := Promote(ctx, st, runs, m, tier)
		if valid := m.Version == "v1" && m.By != "" && m.Key != "" && m.Repo == testRepo; valid != (err == nil) {
			t.Errorf("%+v: err = %v", m, err)
		} else if err != nil && !errors.Is(err, ErrInvalidMeta) {
			t.Errorf("%+v: err = %v, want ErrInvalidMeta", m, err)
		}
	}
	// A release version is bound to one baseline.
	if _, _, err := Promote(ctx, st, runs, Meta{Repo: testRepo, Key: testKey, Version: "v1", Commit: testCommit, By: "y"}, tier); !errors.Is(err, ErrInvalidMeta) || !strings.Contains(err.Error(), "already baseline #1") {
		t.Errorf("same version twice: %v", err)
	}
}

// The noise history is the baselines measured like the latest (same card
// model and load), newest first, without the one compared against; one
// measured under another load does not count.
func TestHistory(t *testing.T) {
	t.Parallel()
	ctx, st, tier := context.Background(), openStore(t), mergeTier(t)
	if h, err := History(ctx, st, testRepo, testKey, 0); err != nil || len(h.Sessions) != 0 {
		t.Fatalf("no baselines: %+v, %v", h, err)
	}
	for i, v := range []string{"v1", "v2", "v3"} {
		runs := makeRuns(5, uint64(i+1), 0.01, nil)
		if v == "v1" {
			for _, r := range runs {
				r.Perfgate.Load.MaxConcurrency = 1
			}
		}
		m := meta(v)
		m.AllowLower, m.Reason = true, "test"
		if _, _, err := Promote(ctx, st, runs, m, tier); err != nil {
			t.Fatal(err)
		}
	}
	h, err := History(ctx, st, testRepo, testKey, 0)
	if err != nil || len(h.Sessions) != 2 || h.Sessions[0].Label != "baseline #3 (v3)" || len(h.Sessions[0].Runs) != 5 {
		t.Fatalf("history = %d sessions (%v), %v; want #3, #2", len(h.Sessions), h.Sessions, err)
	}
	opt, err := Options(ctx, st, testRepo, testKey, 3, gate.Looks{Alpha: 0.005, Spent: []gate.Look{{Alpha: 0.0025}}})
	if err != nil || len(opt.History.Sessions) != 1 || opt.History.Sessions[0].Label != "baseline #2 (v2)" || len(opt.Looks.Spent) != 1 {
		t.Errorf("options against #3 = %+v, %v", opt, err)
	}
}

func TestFind(t *testing.T) {
	t.Parallel()
	ctx, st, tier := context.Background(), openStore(t), mergeTier(t)
	for i, v := range []string{"v0.25.0", "v0.26.0"} {
		if _, _, err := Promote(ctx, st, makeRuns(5, uint64(i+1), 0.01, nil), meta(v), tier); err != nil {
			t.Fatal(err)
		}
	}
	for ref, want := range map[string]int{"": 2, "1": 1, "#2": 2, "v0.25.0": 1, "v0.26.0": 2} {
		s, err := Find(ctx, st, testRepo, testKey, ref)
		if err != nil || s.Version != want {
			t.Errorf("Find(%q) = #%d, %v; want #%d", ref, s.Version, err, want)
		}
	}
	for _, ref := range []string{"3", "v9"} {
		if _, err := Find(ctx, st, testRepo, testKey, ref); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Find(%q): %v, want ErrNotFound", ref, err)
		}
	}
}
