package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/analysis/bisect"
	"github.com/perfgate/perfgate/internal/github/bisectjob"
	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/store"
)

// BisectOptions shape the bisect scenario.
type BisectOptions struct {
	Dir string // the SQLite file's directory (temporary when empty), or a postgres:// DSN
	// Commits is how many commits land on main after the good one (8 when
	// 0); Planted is the one (1…Commits) whose inference_engine/sim.yaml
	// sets Slowdown (a random one when 0; 1.2 = 20% slower when 0).
	Commits  int
	Planted  int
	Slowdown float64
	Perfgate string // the perfgate binary the engine command runs; this executable when empty
	// Engine is EngineSim (the default) or EngineOllama: the repository
	// serves Ollama from each commit's checkout, and the planted commit
	// adds a fifth transformer block to model/perfgate-tiny.gguf (about
	// +19% work per token; Slowdown does not apply). Ollama is the binary
	// (FindOllama when empty).
	Engine, Ollama string
	Out            io.Writer
	Log            zerolog.Logger
}

// BisectOutcome is what the bisect scenario saw.
type BisectOutcome struct {
	// History is main from the good commit to the bad one, oldest first;
	// Planted and Found are the commit that slowed the engine and the
	// commit the bisect named ("" when it named none).
	History        []string
	Planted, Found string
	Status         bisect.Status
	// Steps are the commits measured between the ends, Jobs the GPU jobs
	// and Runs the measured runs of the whole bisect.
	Steps, Jobs, Runs int
	Started, Report   string // the reply to the command and the result comment
	Elapsed           time.Duration
	// Pins is the card each of the bisect's jobs was pinned to, in order
	// ("" for the first, which any card may take).
	Pins []string
}

// The issue the scenario's maintainer asks on, and who they are.
const (
	bisectIssue      = 31
	bisectMaintainer = "hubot-maintainer"
)

// RunBisect runs the bisect scenario: main gets Commits commits after the
// demo's first one, one of which makes the engine slower in
// inference_engine/sim.yaml; a maintainer comments `/perf bisect <good>
// main` on an issue; the server lists the commits through the local
// GitHub's compare API and the runner measures the commits the bisect
// asks for, each engine started from that commit's checkout, all on one
// card; the bisect's report names a commit, printed next to the planted
// one.
func RunBisect(ctx context.Context, o BisectOptions) (*BisectOutcome, error) {
	if o.Commits <= 0 {
		o.Commits = 8
	}
	if o.Planted == 0 {
		o.Planted = 1 + rand.IntN(o.Commits)
	}
	if o.Planted < 1 || o.Planted > o.Commits {
		return nil, fmt.Errorf("the planted commit must be one of 1…%d, not %d", o.Commits, o.Planted)
	}
	if o.Slowdown <= 0 {
		o.Slowdown = 1.2
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	withEngine, err := engineOption(o.Engine, o.Ollama)
	if err != nil {
		return nil, err
	}
	// The engine's option last: the Ollama repository's config replaces
	// the sim's bisect config.
	h, err := Start(ctx, o.Dir, o.Log, WithPerfgate(o.Perfgate), func(c *startConfig) { c.config = bisectConfig }, withEngine)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	fmt.Fprintf(o.Out, "perfgate demo --scenario bisect: server on %s, store %s, local GitHub on %s\n", h.URL, h.DB, h.GitHub.URL)
	if h.Engine != "" {
		fmt.Fprintf(o.Out, "the engine is real: %s, started from each measured commit's checkout by its inference_engine/serve.sh\n", h.Engine)
	}
	out, err := h.Bisect(ctx, o.Commits, o.Planted, o.Slowdown, o.Out)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Out, "\nThe store is kept at %s.\n", h.DB)
	return out, nil
}

// Bisect lands n commits on main, the planted-th of which sets the
// engine's slowdown, asks for `/perf bisect` over them on an issue as a
// maintainer, and waits for the bisect's report.
func (h *Harness) Bisect(ctx context.Context, n, planted int, slowdown float64, w io.Writer) (*BisectOutcome, error) {
	plant := h.bisectPlant(slowdown)
	r := h.Repo
	good, err := r.commit(plant.goodMsg, plant.good)
	if err != nil {
		return nil, err
	}
	out := &BisectOutcome{History: []string{good}}
	for i := 1; i <= n; i++ {
		files := map[string]string{"model/CHANGELOG.md": fmt.Sprintf("# model\n\nchange %d\n", i)}
		title := fmt.Sprintf("model: tidy the loader, part %d (#%d)", i, 100+i)
		if i == planted {
			maps.Copy(files, plant.bad)
			title = fmt.Sprintf("%s (#%d)", plant.badMsg, 100+i)
		}
		sha, err := r.commit(title, files)
		if err != nil {
			return nil, err
		}
		out.History = append(out.History, sha)
		if i == planted {
			out.Planted = sha
		}
	}
	bad := out.History[n]
	fmt.Fprintf(w, "main: %s (good) and %d commits after it up to %s (bad); commit %d of %d, %s, %s (the planted regression)\n",
		short(good), n, short(bad), planted, n, short(out.Planted), plant.story)

	h.GitHub.SetPermission(repo, bisectMaintainer, "admin", "maintain")
	body := fmt.Sprintf("TPOT went up on main; which commit?\n/perf bisect %s main", short(good))
	fmt.Fprintf(w, "a maintainer comments on issue #%d: %q\n", bisectIssue, body)
	payload, err := issueComment(bisectIssue, bisectMaintainer, body)
	if err != nil {
		return nil, err
	}
	began := time.Now()
	if code, err := h.deliver(ctx, "issue_comment", payload, "demo-bisect-1"); err != nil || code/100 != 2 {
		return nil, fmt.Errorf("webhook: %d %w", code, err)
	}
	started, err := h.waitComment(ctx, func(c githubtest.Comment) bool {
		return c.Number == bisectIssue && strings.HasPrefix(c.Body, "@"+bisectMaintainer)
	}, time.Minute)
	if err != nil {
		return nil, fmt.Errorf("the reply to /perf bisect: %w", err)
	}
	out.Started = started.Body
	fmt.Fprintf(w, "perfgate replies: %s\n\n", started.Body)
	if !strings.Contains(started.Body, "Bisect started") {
		return out, fmt.Errorf("the bisect did not start: %s", started.Body)
	}
	report, err := h.waitComment(ctx, func(c githubtest.Comment) bool {
		return c.Number == bisectIssue && strings.HasPrefix(c.Body, "### perfgate bisect")
	}, time.Duration(240*n+1200)*time.Second)
	if err != nil {
		return nil, fmt.Errorf("the bisect's report: %w", err)
	}
	out.Report, out.Elapsed = report.Body, time.Since(began)
	recs, err := h.Store.ListBisects(ctx, store.BisectFilter{Repo: repo})
	if err != nil || len(recs) == 0 {
		return nil, fmt.Errorf("the bisect's record: %d records, %w", len(recs), err)
	}
	s, err := bisect.Load(recs[len(recs)-1].State)
	if err != nil {
		return nil, err
	}
	if s.Result == nil {
		return nil, errors.New("the bisect reported without a result")
	}
	res := s.Result
	out.Status, out.Steps, out.Jobs, out.Runs = res.Status, res.Steps, res.Jobs, res.Runs
	if res.Culprit != nil {
		out.Found = res.Culprit.SHA
	}
	jobs, err := h.Store.ListJobs(ctx, store.JobFilter{Repo: repo})
	if err != nil {
		return nil, err
	}
	for _, j := range jobs {
		if j.Kind == bisectjob.Kind {
			out.Pins = append(out.Pins, j.GPUUUID)
			pin := "pinned to " + j.GPUUUID
			if j.GPUUUID == "" {
				pin = "the first job: any card"
			}
			fmt.Fprintf(w, "GPU job %d: commit %s next to %s, interleaved (%s), %s on the runner, %s\n", j.ID, short(j.HeadSHA), short(j.BaseSHA), pin,
				j.FinishedAt.Sub(j.StartedAt).Round(100*time.Millisecond), j.Status)
		}
	}
	fmt.Fprintf(w, "----- the bisect's report on issue #%d -----\n%s\n--------------------------------------------\n\n", bisectIssue, report.Body)
	verdict := "the planted commit"
	if out.Found != out.Planted {
		verdict = "NOT the planted commit"
	}
	fmt.Fprintf(w, "planted: %s (commit %d of %d)\nfound:   %s (%s): %s\n", short(out.Planted), planted, n, orNone(short(out.Found)), res.Status, verdict)
	fmt.Fprintf(w, "%d commits measured between the ends (⌈log2 %d⌉ = %d), %d GPU jobs, %d runs, %s\n",
		out.Steps, n, bisect.Steps(n), out.Jobs, out.Runs, out.Elapsed.Round(time.Second))
	return out, nil
}

// bisectPlant is what the bisect scenario's history holds besides the
// ordinary commits (each edits model/CHANGELOG.md): the good commit's
// files and the planted commit's change.
type bisectPlant struct {
	goodMsg string
	good    map[string]string
	badMsg  string
	bad     map[string]string
	story   string
}

// plantedTitle is the title of the bisect scenario's planted commit for
// an engine (without its PR number): what the report must name.
func plantedTitle(engine string) string {
	if engine == EngineOllama {
		return ollamaPlantedTitle
	}
	return simPlantedTitle
}

const (
	simPlantedTitle    = "inference_engine: re-tile the decode kernel"
	ollamaPlantedTitle = "model: a fifth transformer block"
)

func (h *Harness) bisectPlant(slowdown float64) bisectPlant {
	if h.Engine != "" { // the real engine: a model change in the Ollama layout
		return bisectPlant{
			goodMsg: "model: note the release", good: map[string]string{"model/CHANGELOG.md": "# model\n\nrelease 1\n"},
			badMsg: ollamaPlantedTitle, bad: map[string]string{"model/perfgate-tiny.gguf": fifthBlockGGUF()},
			story: "adds a fifth transformer block to model/perfgate-tiny.gguf (about +19% work per token)",
		}
	}
	// The good commit: the engine's knobs for a bisect on a busy machine.
	return bisectPlant{
		goodMsg: "inference_engine: longer decode steps, fewer in flight", good: map[string]string{"inference_engine/sim.yaml": bisectKnobs(1)},
		badMsg: simPlantedTitle, bad: map[string]string{"inference_engine/sim.yaml": bisectKnobs(slowdown)},
		story: fmt.Sprintf("sets inference_engine/sim.yaml slowdown: %g", slowdown),
	}
}

// bisectConfig is the demo repository's config with a quick tier a busy
// machine measures steadily: 100 requests, 25 in flight, 16 tokens each,
// a short warm-up. With 100 in flight and 8 ms steps (the default
// scenario's) the simulated engine and the client fight for two loaded
// cores, and one run's TPOT median spread 31% from the next at a load of
// 28; with these and bisectKnobs' 40 ms steps, 1.7% at a load of 31.
func bisectConfig(perfgate string) string {
	c := repoConfig(perfgate)
	c = strings.Replace(c, "  output_len: 48\n", "  output_len: 16\n", 1)
	c = strings.Replace(c, "  max_concurrency: 50\n", "  max_concurrency: 25\n", 1)
	return strings.Replace(c, "    warmup: 16\n", "    warmup: 4\n", 1)
}

// bisectKnobs is inference_engine/sim.yaml in the bisect scenario: the
// default scenario's engine with 40 ms decode steps (see bisectConfig),
// slowed by slowdown.
func bisectKnobs(slowdown float64) string {
	return strings.Replace(simKnobs(slowdown), "decode_step: 8ms\n", "decode_step: 40ms\n", 1)
}

// issueComment is an issue_comment webhook (GitHub's shape, from the
// fixture) for a comment by login on issue number, which is no pull
// request.
func issueComment(number int, login, body string) ([]byte, error) {
	raw, err := fixture("issue_comment/created.retest.json")
	if err != nil {
		return nil, err
	}
	var ev map[string]any
	if err := json.Unmarshal(raw, &ev); err != nil {
		return nil, fmt.Errorf("demo fixture: %w", err)
	}
	issue, ok1 := ev["issue"].(map[string]any)
	comment, ok2 := ev["comment"].(map[string]any)
	user, ok3 := comment["user"].(map[string]any)
	if !ok1 || !ok2 || !ok3 {
		return nil, errors.New("demo fixture: issue_comment lacks issue, comment or user")
	}
	delete(issue, "pull_request")
	issue["number"], issue["title"] = number, "TPOT regression on main"
	comment["body"], user["login"] = body, login
	return json.Marshal(ev)
}

// waitComment waits for a comment the predicate accepts.
func (h *Harness) waitComment(ctx context.Context, done func(githubtest.Comment) bool, limit time.Duration) (githubtest.Comment, error) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		for _, c := range h.GitHub.Comments() {
			if done(c) {
				return c, nil
			}
		}
		select {
		case <-ctx.Done():
			return githubtest.Comment{}, fmt.Errorf("waiting for a comment: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	last := "none"
	if cs := h.GitHub.Comments(); len(cs) > 0 {
		last = fmt.Sprintf("%q", firstLine(cs[len(cs)-1].Body))
	}
	return githubtest.Comment{}, fmt.Errorf("timed out after %s; the last comment: %s", limit, last)
}
