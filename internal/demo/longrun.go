package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/perfgate/perfgate/internal/agentapi"
	"github.com/perfgate/perfgate/internal/artifact"
	"github.com/perfgate/perfgate/internal/capacity"
	"github.com/perfgate/perfgate/internal/dispatch"
	"github.com/perfgate/perfgate/internal/githubtest"
	"github.com/perfgate/perfgate/internal/jobstate"
	"github.com/perfgate/perfgate/internal/soak"
	"github.com/perfgate/perfgate/internal/store"
)

// The long-run scenarios' pull requests.
const (
	kvPR        = 31 // capacity: a smaller KV cache
	leakPR      = 32 // soak: a per-request cache never evicted
	cleanSoakPR = 33 // soak: a change that leaks nothing
)

// longRunKnobs is inference_engine/sim.yaml of the long-run scenarios: an
// engine whose capacity is its batch (8 sequences of 48 tokens, 20 ms
// decode steps: about 20 requests/s), quiet apart from 2% step jitter so
// a sweep of a few minutes finds the same knee twice. blocks sizes the KV
// cache; leak plants leak_mb_per_1k_requests.
func longRunKnobs(blocks int, leak float64) string {
	return fmt.Sprintf(`# The engine's knobs (perfgate sim --config inference_engine/sim.yaml).
model: perfgate-sim
max_model_len: 128
max_num_seqs: 8
max_num_batched_tokens: 512
# KV cache: 64 blocks of 16 tokens hold the whole batch; fewer hold fewer
# sequences at once, whatever max_num_seqs says.
num_gpu_blocks: %d
decode_step: 20ms
per_seq_cost: 0s
base_ttft: 5ms
prefill_step_overhead: 0s
jitter: 0.02
card_cv: 0
session_cv: 0
drift_per_hour: 0
throttle_every: 0s
leak_mb_per_1k_requests: %g
`, blocks, leak)
}

// longRunConfig is perfgate.yml of the long-run scenarios.
func longRunConfig(perfgate string) string {
	return simEngineYAML(perfgate) + `workload:
  dataset: random
  input_len: 32
  output_len: 16
  endpoint: /v1/completions
tiers:
  quick:
    prompts: 100
    repeats: 3
    warmup: 4
`
}

// CapacityOutcome is what the capacity scenario saw.
type CapacityOutcome struct {
	Base, Head string
	Verdict    dispatch.CapacityVerdict
	Comment    string // the capacity comment on the PR
	Page       string // the check page written (HTML, the curve inline)
}

// RunCapacity runs the capacity scenario: PR #31 shrinks the engine's KV
// cache from 64 blocks to 9 (room for a bigger model), which leaves
// light-load latency alone; the capacity tier sweeps base and head on the
// runner, ABBA, finds head's knee far lower, and posts the comparison with
// its latency–throughput table on the PR. The curve's page is written to
// the demo's directory.
func RunCapacity(ctx context.Context, o Options) (*CapacityOutcome, error) {
	h, out, err := longRunStart(ctx, &o)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	main, err := h.Repo.commit("inference_engine: a batch of 8", map[string]string{
		"inference_engine/sim.yaml": longRunKnobs(64, 0),
	})
	if err != nil {
		return nil, err
	}
	h.Repo.Main = main
	head, err := h.Repo.branch("small-kv", "engine: a 9-block KV cache, to make room for a bigger model",
		map[string]string{"inference_engine/sim.yaml": longRunKnobs(9, 0)})
	if err != nil {
		return nil, err
	}
	if err := h.setPR(kvPR, head); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "perfgate demo --scenario capacity: server on %s, store %s, local GitHub on %s\n", h.URL, h.DB, h.GitHub.URL)
	fmt.Fprintf(out, "main %s: the engine batches 8 sequences, its KV cache holds 64 blocks\n", short(main))
	fmt.Fprintf(out, "PR #%d %s: inference_engine/sim.yaml num_gpu_blocks: 64 → 9 (light-load latency unchanged)\n\n", kvPR, short(head))

	cp := &agentapi.CapacityPlan{
		Sweep: capacity.Plan{Rates: []float64{2, 4, 8, 16, 32}, Resolution: 0.15},
		SLO:   capacity.SLO{TTFTms: 250}, Arrivals: "constant", StepSeconds: 4, MinPrompts: 24, Sweeps: o.Sweeps,
	}
	fmt.Fprintf(out, "1. The capacity tier sweeps base and head on the runner (%d sweep(s) each, ABBA): rates %v requests/s, then a bisection to 15%%; SLO TTFT ≤ 250 ms for 95%% of requests…\n",
		max(1, cp.Sweeps), cp.Sweep.Rates)
	job, err := h.queueLongRun(ctx, kvPR, main, head, func(p *agentapi.Plan) { p.Capacity = cp })
	if err != nil {
		return nil, err
	}
	j, err := h.waitJob(ctx, job.ID)
	if err != nil {
		return nil, err
	}
	comment, err := h.waitPRComment(ctx, kvPR, "perfgate capacity")
	if err != nil {
		return nil, err
	}
	files, err := h.artifactFiles()
	if err != nil {
		return nil, err
	}
	v, err := dispatch.JudgeCapacity(ctx, h.Store, files, j)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "----- PR #%d comment -----\n%s\n--------------------------\n\n", kvPR, comment)
	page := filepath.Join(o.Dir, "capacity.html")
	if err := writeCapacityPage(page, kvPR, v); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "2. The latency–throughput curve, knees marked: %s\n", page)
	return &CapacityOutcome{Base: main, Head: head, Verdict: v, Comment: comment, Page: page}, nil
}

// SoakOutcome is what the soak scenario saw.
type SoakOutcome struct {
	Leak, Clean agentapi.SoakRun
	LeakComment string
	CleanNote   string
}

// RunSoak runs the soak scenario: PR #32 keeps every request's prompt in a
// cache nothing evicts (the sim's leak_mb_per_1k_requests: 400), PR #33
// changes nothing that leaks; each head is soaked for o.SoakDuration under
// a steady load while the runner samples the engine process's RSS, the
// card's memory, /metrics and latency; the leak fails on memory growth,
// the clean PR passes.
func RunSoak(ctx context.Context, o Options) (*SoakOutcome, error) {
	h, out, err := longRunStart(ctx, &o)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	main, err := h.Repo.commit("inference_engine: a batch of 8", map[string]string{"inference_engine/sim.yaml": longRunKnobs(64, 0)})
	if err != nil {
		return nil, err
	}
	h.Repo.Main = main
	leaky, err := h.Repo.branch("prompt-cache", "engine: keep every prompt for reuse", map[string]string{"inference_engine/sim.yaml": longRunKnobs(64, 400)})
	if err != nil {
		return nil, err
	}
	clean, err := h.Repo.branch("quieter-logs", "engine: quieter logs", map[string]string{"inference_engine/sim.yaml": longRunKnobs(64, 0) + "# quieter logs\n"})
	if err != nil {
		return nil, err
	}
	for pr, sha := range map[int]string{leakPR: leaky, cleanSoakPR: clean} {
		if err := h.setPR(pr, sha); err != nil {
			return nil, err
		}
	}
	dur := o.SoakDuration
	if dur <= 0 {
		dur = 2 * time.Minute
	}
	window := max((dur / 30).Round(100*time.Millisecond), time.Second)
	fmt.Fprintf(out, "perfgate demo --scenario soak: server on %s, store %s, local GitHub on %s\n", h.URL, h.DB, h.GitHub.URL)
	fmt.Fprintf(out, "PR #%d %s keeps every prompt (leak_mb_per_1k_requests: 400); PR #%d %s leaks nothing\n\n", leakPR, short(leaky), cleanSoakPR, short(clean))
	th := soak.DefaultThresholds()
	// Minutes on a shared machine stand for the nightly hours: latency
	// moves with the neighbours, so only memory, cache and KV are held.
	th.MaxLatencyCreepPerHour = 0
	// A clean engine's heap grew 12 MB in its first 40 s here, which an
	// hour's extrapolation calls 1.3 GB/h: the floor, not the slope,
	// separates it from the leak (190 MB in the same time).
	th.MemoryNoiseMB = 48
	res := &SoakOutcome{}
	for _, pr := range []struct {
		n   int
		sha string
		run *agentapi.SoakRun
	}{{leakPR, leaky, &res.Leak}, {cleanSoakPR, clean, &res.Clean}} {
		fmt.Fprintf(out, "Soaking PR #%d (%s) for %s at 20 requests/s, a sample every %s…\n", pr.n, short(pr.sha), dur, window)
		job, err := h.queueLongRun(ctx, pr.n, main, pr.sha, func(p *agentapi.Plan) {
			p.BaseSHA = ""
			p.Soak = &agentapi.SoakPlan{Duration: agentapi.Duration(dur), Window: agentapi.Duration(window), Rate: 20, Thresholds: th}
		})
		if err != nil {
			return nil, err
		}
		j, err := h.waitJob(ctx, job.ID)
		if err != nil {
			return nil, err
		}
		comment, err := h.waitPRComment(ctx, pr.n, "perfgate soak")
		if err != nil {
			return nil, err
		}
		files, err := h.artifactFiles()
		if err != nil {
			return nil, err
		}
		if *pr.run, err = dispatch.JudgeSoak(ctx, h.Store, files, j); err != nil {
			return nil, err
		}
		if pr.n == leakPR {
			res.LeakComment = comment
		} else {
			res.CleanNote = comment
		}
		fmt.Fprintf(out, "----- PR #%d comment -----\n%s\n--------------------------\n\n", pr.n, comment)
	}
	return res, nil
}

// longRunStart starts the harness with the long-run scenarios' config.
func longRunStart(ctx context.Context, o *Options) (*Harness, io.Writer, error) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	perfgate := o.Perfgate
	if perfgate == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, nil, fmt.Errorf("the demo's engine is this perfgate binary, which cannot be found: %w", err)
		}
		perfgate = exe
	}
	if o.Dir == "" {
		d, err := os.MkdirTemp("", "perfgate-demo-")
		if err != nil {
			return nil, nil, err
		}
		o.Dir = d
	}
	h, err := Start(ctx, o.Dir, o.Log, WithPerfgate(perfgate))
	if err != nil {
		return nil, nil, err
	}
	if _, err := h.Repo.commit("perfgate: the long-run tiers", map[string]string{".github/perfgate.yml": longRunConfig(perfgate)}); err != nil {
		h.Close()
		return nil, nil, err
	}
	return h, o.Out, nil
}

// queueLongRun queues a capacity or soak job of head against base for pr,
// the plan built from main's config as the quick tier's, then shaped by
// set.
func (h *Harness) queueLongRun(ctx context.Context, pr int, base, head string, set func(*agentapi.Plan)) (store.Job, error) {
	cfg, err := h.RepoConfig()
	if err != nil {
		return store.Job{}, err
	}
	plan, err := agentapi.PlanAt(cfg, "quick", agentapi.Commits{Repo: repo, Head: head})
	if err != nil {
		return store.Job{}, err
	}
	plan.BaseSHA = base
	set(&plan)
	kind := agentapi.KindCapacity
	if plan.Soak != nil {
		kind = agentapi.KindSoak
	}
	plan.Tier = kind
	if err := plan.Validate(); err != nil {
		return store.Job{}, err
	}
	snap, err := json.Marshal(plan)
	if err != nil {
		return store.Job{}, fmt.Errorf("encode plan: %w", err)
	}
	return h.Store.Enqueue(ctx, store.JobSpec{Tier: kind, Kind: kind, Repo: repo, InstallationID: githubtest.InstallationID,
		PRNumber: pr, HeadSHA: head, BaseSHA: plan.BaseSHA, Config: snap, Labels: cfg.Runner.Labels})
}

// waitJob waits for a job to succeed; a failed or cancelled one is an
// error naming its reason.
func (h *Harness) waitJob(ctx context.Context, id int64) (store.Job, error) {
	for {
		j, err := h.Store.GetJob(ctx, id)
		if err != nil {
			return store.Job{}, err
		}
		switch j.Status {
		case jobstate.Succeeded:
			return j, nil
		case jobstate.Failed, jobstate.Cancelled:
			return j, fmt.Errorf("job %d %s: %s", j.ID, j.Status, j.FailureReason)
		}
		select {
		case <-ctx.Done():
			return store.Job{}, fmt.Errorf("job %d still %s: %w", id, j.Status, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// writeCapacityPage writes the capacity check's page: the verdict, the
// curve and the table.
func writeCapacityPage(path string, pr int, v dispatch.CapacityVerdict) error {
	var b strings.Builder
	fmt.Fprintf(&b, "<!doctype html><html><head><meta charset=\"utf-8\"><title>perfgate / capacity · PR #%d</title>", pr)
	b.WriteString("<style>body{font-family:sans-serif;margin:24px}pre{background:#f6f8fa;padding:12px;overflow:auto}</style></head><body>")
	fmt.Fprintf(&b, "<h1>perfgate / capacity · PR #%d: %s</h1><p id=\"why\">%s</p>", pr, html.EscapeString(string(v.Comparison.Verdict)), html.EscapeString(v.Comparison.Why))
	b.WriteString("<div id=\"curve\">" + v.SVG + "</div>")
	b.WriteString("<pre id=\"table\">" + html.EscapeString(v.Markdown) + "</pre></body></html>\n")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write capacity page: %w", err)
	}
	return nil
}

// artifactFiles opens what the demo's server keeps of uploaded artifacts.
func (h *Harness) artifactFiles() (dispatch.TraceFiles, error) {
	d, err := artifact.NewDir(filepath.Join(h.work, "artifacts"), 0)
	if err != nil {
		return nil, err
	}
	return artifactOpener{d}, nil
}

type artifactOpener struct{ d *artifact.Dir }

func (a artifactOpener) Open(sum string) (io.ReadCloser, error) { return a.d.Open(sum) }
