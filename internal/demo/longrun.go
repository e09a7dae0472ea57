package demo

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/perfgate/perfgate/internal/github/artifact"
	"github.com/perfgate/perfgate/internal/github/dispatch"
	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/check"
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

// longRunConfig is perfgate.yml of the long-run scenarios: the quick
// tier's workload and the capacity: and soak: tiers. A sweep offers 2–32
// requests/s for 4 s a rate (sweeps per commit), then bisects to 15%;
// the SLO is TTFT ≤ 250 ms for 95% of requests. A soak keeps 20
// requests/s on the head for soak, a sample every thirtieth of it.
func longRunConfig(perfgate string, sweeps int, soakFor time.Duration) string {
	return simEngineYAML(perfgate) + fmt.Sprintf(`workload:
  dataset: random
  input_len: 32
  output_len: 16
  endpoint: /v1/completions
tiers:
  quick:
    prompts: 100
    repeats: 3
    warmup: 4
capacity:
  rates: [2, 4, 8, 16, 32]
  resolution: 0.15
  slo: {ttft_ms: 250}
  arrivals: constant
  step: 4s
  min_prompts: 24
  sweeps: %d
  # Both engines stay up and alternate rate by rate: a neighbour that
  # slows the machine mid-sweep slows base and head alike.
  interleave: steps
soak:
  duration: %s
  window: %s
  rate: 20
  thresholds:
    # Minutes on a shared machine stand for the nightly hours: latency
    # moves with the neighbours, so only memory, cache and KV are held.
    max_latency_creep_per_hour: 0
    # A clean engine's heap grew 12 MB in its first 40 s here, which an
    # hour's extrapolation calls 1.3 GB/h: the floor, not the slope,
    # separates it from the leak (190 MB in the same time).
    memory_noise_mb: 48
`, max(1, sweeps), soakFor, soakWindow(soakFor))
}

// soakDuration is a scenario's soak (default 2 minutes).
func soakDuration(o Options) time.Duration {
	if o.SoakDuration > 0 {
		return o.SoakDuration
	}
	return 2 * time.Minute
}

// soakWindow samples a soak thirty times, at least once a second.
func soakWindow(d time.Duration) time.Duration {
	return max((d / 30).Round(100*time.Millisecond), time.Second)
}

// CapacityOutcome is what the capacity scenario saw.
type CapacityOutcome struct {
	Base, Head string
	Verdict    dispatch.CapacityVerdict
	// Check is the `perfgate / capacity` check run as GitHub has it.
	Check githubtest.CheckRun
	// Page is the check's web page as the server served it, saved (the
	// curve inline); PageURL where the server served it.
	Page, PageURL string
}

// RunCapacity runs the capacity scenario: PR #31 shrinks the engine's KV
// cache from 64 blocks to 9 (room for a bigger model), which leaves
// light-load latency alone. A maintainer comments `/perf capacity`; the
// capacity tier sweeps base and head on the runner, ABBA, finds head's
// knee far lower, and concludes the `perfgate / capacity` check with the
// latency–throughput table: a regression, which warns first (neutral) as
// every regression does. The check's web page, with the curve, is saved
// in the demo's directory.
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

	cfg, err := h.RepoConfig()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "1. A maintainer comments `/perf capacity`: the capacity tier (perfgate.yml capacity:) sweeps base and head on the runner (%d sweep(s) each, ABBA): rates %v requests/s, then a bisection to %.0f%%; SLO TTFT ≤ %g ms for 95%% of requests…\n",
		cfg.Capacity.Sweeps, cfg.Capacity.Rates, 100*cfg.Capacity.Resolution, cfg.Capacity.SLO.TTFTms)
	c, err := h.longRunCommand(ctx, out, kvPR, head, check.TierCapacity)
	if err != nil {
		return nil, err
	}
	j, err := h.longRunJob(ctx, head, check.TierCapacity)
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
	res := &CapacityOutcome{Base: main, Head: head, Verdict: v, Check: c}
	res.PageURL = h.Server.Web().CheckRunURL(repo, head, string(check.TierCapacity))
	if strings.HasPrefix(res.PageURL, "/") {
		res.PageURL = h.URL + res.PageURL // the demo's server has no public URL
	}
	res.Page = filepath.Join(o.Dir, "capacity.html")
	if err := savePage(ctx, res.PageURL, res.Page); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "2. The check's page, the latency–throughput curve with both knees marked: %s\n   saved as %s\n", res.PageURL, res.Page)
	return res, nil
}

// SoakOutcome is what the soak scenario saw.
type SoakOutcome struct {
	Leak, Clean           agentapi.SoakRun
	LeakCheck, CleanCheck githubtest.CheckRun
}

// RunSoak runs the soak scenario: PR #32 keeps every request's prompt in a
// cache nothing evicts (the sim's leak_mb_per_1k_requests: 400), PR #33
// changes nothing that leaks. A maintainer comments `/perf soak` on each;
// the soak tier (perfgate.yml soak:) keeps a steady load on the head's
// engine while the runner samples its process's RSS, the card's memory,
// /metrics and latency. The leak's `perfgate / soak` check warns on memory
// growth; the clean PR's succeeds.
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
	dur := soakDuration(o)
	fmt.Fprintf(out, "perfgate demo --scenario soak: server on %s, store %s, local GitHub on %s\n", h.URL, h.DB, h.GitHub.URL)
	fmt.Fprintf(out, "PR #%d %s keeps every prompt (leak_mb_per_1k_requests: 400); PR #%d %s leaks nothing\n\n", leakPR, short(leaky), cleanSoakPR, short(clean))
	res := &SoakOutcome{}
	for _, pr := range []struct {
		n   int
		sha string
		run *agentapi.SoakRun
		c   *githubtest.CheckRun
	}{{leakPR, leaky, &res.Leak, &res.LeakCheck}, {cleanSoakPR, clean, &res.Clean, &res.CleanCheck}} {
		fmt.Fprintf(out, "A maintainer comments `/perf soak` on PR #%d (%s): %s at 20 requests/s, a sample every %s…\n", pr.n, short(pr.sha), dur, soakWindow(dur))
		c, err := h.longRunCommand(ctx, out, pr.n, pr.sha, check.TierSoak)
		if err != nil {
			return nil, err
		}
		*pr.c = c
		j, err := h.longRunJob(ctx, pr.sha, check.TierSoak)
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
	}
	return res, nil
}

// longRunCommand has a maintainer comment `/perf <tier>` on PR number and
// waits for the tier's check run on sha to conclude; it prints the check
// as GitHub shows it.
func (h *Harness) longRunCommand(ctx context.Context, out io.Writer, number int, sha string, tier check.Tier) (githubtest.CheckRun, error) {
	h.GitHub.SetPermission(repo, "monalisa", "admin", "maintain")
	if err := h.commentOnPR(ctx, number, "/perf "+string(tier), fmt.Sprintf("%s-%d", tier, number)); err != nil {
		return githubtest.CheckRun{}, err
	}
	name := check.CheckName(tier)
	c, err := waitCheckFor(ctx, h.GitHub, 9*time.Minute, fmt.Sprintf("%s on %s to complete after /perf %s", name, short(sha), tier), func(c githubtest.CheckRun) bool {
		return c.Name == name && c.HeadSHA == sha && c.Status == "completed"
	})
	if err != nil {
		return c, fmt.Errorf("%s on PR #%d: %w", name, number, err)
	}
	fmt.Fprintf(out, "----- check run %q on PR #%d: %s → %s -----\n%s\n\n%s\n-------------------------------------------\n\n",
		c.Name, number, strings.Join(c.Statuses, " → "), c.Conclusion, c.Title, c.Summary)
	return c, nil
}

// longRunJob is the job of sha's tier check run.
func (h *Harness) longRunJob(ctx context.Context, sha string, tier check.Tier) (store.Job, error) {
	cr, err := h.Store.GetCheckRun(ctx, repo, sha, string(tier))
	if err != nil {
		return store.Job{}, fmt.Errorf("%s check of %s: %w", tier, short(sha), err)
	}
	if len(cr.JobIDs) == 0 {
		return store.Job{}, fmt.Errorf("%s check of %s has no job", tier, short(sha))
	}
	return h.Store.GetJob(ctx, cr.JobIDs[len(cr.JobIDs)-1])
}

// savePage saves the page at url to path.
func savePage(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("check page: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("check page: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Errorf("check page %s: %d %w", url, resp.StatusCode, err)
	}
	if err := os.WriteFile(path, body, 0o600); err != nil {
		return fmt.Errorf("save check page: %w", err)
	}
	return nil
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
	if _, err := h.Repo.commit("perfgate: the long-run tiers", map[string]string{".github/perfgate.yml": longRunConfig(perfgate, o.Sweeps, soakDuration(*o))}); err != nil {
		h.Close()
		return nil, nil, err
	}
	return h, o.Out, nil
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
