// Package demo runs perfgate's whole loop on one machine with nothing
// installed but git: an embedded SQLite store, the server, a local stand-in
// for GitHub's API serving a real git repository (its files and its source
// tarballs), and a runner agent with a fake GPU that starts the simulated
// engine from each commit's own checkout. main is measured and promoted as
// the baseline; then a pull request whose commit makes the engine slower
// (it changes inference_engine/sim.yaml) arrives as a signed webhook, is
// measured from its own tree, warned about, and — once its 48 hours pass —
// escalated; a pull request that only edits a README passes.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/github/baseline"
	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/server"
	"github.com/perfgate/perfgate/internal/runner/agent"
	"github.com/perfgate/perfgate/internal/runner/gpu"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/result"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// Options shape a demo run.
type Options struct {
	Dir      string  // where the SQLite file goes (a temporary directory when empty), or a postgres:// DSN
	Slowdown float64 // the engine slowdown PR #17's commit sets in inference_engine/sim.yaml (1.2 = 20% slower)
	// Perfgate is the perfgate binary the engine command runs (`perfgate
	// sim`); the running executable when empty.
	Perfgate string
	Out      io.Writer
	Log      zerolog.Logger
	// Serve, when set ("127.0.0.1:8080"), keeps the server up after the
	// demo on that address with a month of nightly history (serve.go).
	Serve string
	// Ready, when set, is called with the dashboard's URL once it serves
	// (tests use it; the demo then runs until ctx ends).
	Ready func(dashboardURL string)
	// Engine is EngineSim (the default) or EngineOllama: a real engine,
	// Ollama, started from each commit's checkout (ollama.go).
	Engine string
	// Ollama is the ollama binary (FindOllama when empty).
	Ollama string
	// Sweeps per commit in --scenario capacity (0: 1); SoakDuration is
	// how long --scenario soak soaks each pull request (0: 2 minutes).
	Sweeps       int
	SoakDuration time.Duration
	// afterBaseline, when set (tests), runs once main is promoted and
	// before the pull requests arrive.
	afterBaseline func(*Harness)
}

// Outcome is what the demo saw, for tests.
type Outcome struct {
	Warning, Escalated githubtest.CheckRun
	// Docs is the check of the pull request that only edits a README.
	Docs     githubtest.CheckRun
	Comments []githubtest.Comment
	DB       string
	// Baseline and Head are what was measured for main and for the slow
	// pull request's head: the commits, the trees the engines ran from.
	Baseline, Head Measured
	Repo           RepoSHAs
}

// RepoSHAs are the demo repository's commits.
type RepoSHAs struct{ Main, Slow, Docs string }

// Measured is what one commit's runs recorded.
type Measured struct {
	Commit, Tree string
	Runs         int
	// TPOTMedian is the median over runs of each run's median TPOT (ms);
	// CPUPerToken the median of the engine's CPU ms per output token
	// (0 when the runner did not measure it: the in-process sim).
	TPOTMedian, CPUPerToken float64
	Engine                  string // the engine command that ran
	Sandbox                 string
	// Identity is the real engine's name and version ("ollama v0.9.6");
	// empty for the simulated engine.
	Identity string
}

const (
	repo     = "acme/inference"
	gpuUUID  = "GPU-5f2c0d1e-demo-0000-0000-000000000000"
	regToken = "demo-registration-token" //nolint:gosec // the demo's own runner token, on loopback, not a secret
	// demoMaxTTFTGap is the demo runner's self-check floor (see agent.Config).
	demoMaxTTFTGap = 100 * time.Millisecond
)

// Harness is the demo's running system: store, server, local GitHub, the
// demo repository and the runner. The demo and the end-to-end tests drive
// it.
type Harness struct {
	Store  store.Store
	GitHub *githubtest.Server
	Server *server.Server
	URL    string // the perfgate server
	DB     string
	Repo   *gitRepo
	// Engine names the real engine and its version ("ollama v0.9.6");
	// empty for the simulated one.
	Engine string
	log    zerolog.Logger
	clock  *clock
	work   string
	stop   []func()
	cards  []*gpu.Fake // the runners' fake GPUs, one each
}

// startConfig is what Start assembles.
type startConfig struct {
	server   server.Config
	perfgate string
	slowdown float64
	config   func(perfgate string) string // the repository's perfgate.yml
	agents   int
	engine   string // EngineSim when empty
	ollama   string // the ollama binary, for EngineOllama
}

// StartOption adjusts the demo's set-up.
type StartOption func(*startConfig)

// WithPublicURL sets where people reach the server (the dashboard's links).
func WithPublicURL(u string) StartOption {
	return func(c *startConfig) { c.server.PublicURL = u }
}

// WithPerfgate names the perfgate binary the engine command runs.
func WithPerfgate(path string) StartOption {
	return func(c *startConfig) { c.perfgate = path }
}

// WithOllama makes the repository's engine Ollama (the binary at path; found
// with FindOllama when empty) instead of the simulated one: the model,
// its Modelfile and the server settings are files of the repository.
func WithOllama(path string) StartOption {
	return func(c *startConfig) { c.engine, c.ollama, c.config = EngineOllama, path, ollamaRepoConfig }
}

// engineOption is the StartOption for the demo's engine by name: sim
// (the default) or ollama (the binary at path; FindOllama when empty).
// Options after it may still set the config: the bisect's is the sim's
// only, and WithOllama sets the Ollama repository's.
func engineOption(engine, path string) (StartOption, error) {
	switch engine {
	case "", EngineSim:
		return func(*startConfig) {}, nil
	case EngineOllama:
		return WithOllama(path), nil
	default:
		return nil, fmt.Errorf("engine %q: want %s or %s", engine, EngineSim, EngineOllama)
	}
}

// WithSlowdown sets the slowdown PR #17 writes into the engine's knobs.
func WithSlowdown(f float64) StartOption {
	return func(c *startConfig) { c.slowdown = f }
}

// Start brings the system up with the demo repository (acme/inference:
// main, PR #17 slowing the engine, PR #18 editing a README) and one runner.
func Start(ctx context.Context, dir string, log zerolog.Logger, opts ...StartOption) (*Harness, error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "perfgate-demo-")
		if err != nil {
			return nil, err
		}
		dir = d
	}
	sc := startConfig{slowdown: 1.2, config: repoConfig, agents: 1}
	for _, o := range opts {
		o(&sc)
	}
	if sc.perfgate == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("the demo's engine is this perfgate binary, which cannot be found: %w", err)
		}
		sc.perfgate = exe
	}
	h := &Harness{DB: filepath.Join(dir, "perfgate.db"), log: log, clock: &clock{}, work: filepath.Join(dir, "demo")}
	if strings.HasPrefix(dir, "postgres://") || strings.HasPrefix(dir, "postgresql://") {
		h.DB = dir // the same loop on PostgreSQL, as several replicas would run it
		w, err := os.MkdirTemp("", "perfgate-demo-")
		if err != nil {
			return nil, err
		}
		h.work = w
		h.stop = append(h.stop, func() { os.RemoveAll(w) })
	}
	layout := simLayout(sc.slowdown)
	if sc.engine == EngineOllama {
		if sc.ollama == "" {
			p, err := FindOllama()
			if err != nil {
				h.Close()
				return nil, err
			}
			sc.ollama = p
		}
		// The runner passes the binary to the repository's serve.sh in
		// $OLLAMA_BIN (startAgent allows that one variable through).
		if err := os.Setenv(ollamaEnv, sc.ollama); err != nil {
			h.Close()
			return nil, err
		}
		h.Engine = OllamaIdentity(sc.ollama)
		l, err := ollamaLayout()
		if err != nil {
			h.Close()
			return nil, err
		}
		layout = l
	}
	r, err := makeRepoLayout(filepath.Join(h.work, "acme-inference"), sc.config(sc.perfgate), layout)
	if err != nil {
		h.Close()
		return nil, err
	}
	if sc.engine != EngineOllama {
		r.Slowdown = sc.slowdown
	}
	h.Repo = r
	st, err := store.Open(ctx, h.DB, store.WithClock(h.clock.now))
	if err != nil {
		h.Close()
		return nil, err
	}
	h.Store = st
	h.stop = append(h.stop, func() { st.Close() })
	h.GitHub = githubtest.Start()
	h.stop = append(h.stop, h.GitHub.Close)
	// The local GitHub serves the repository itself: its config at any
	// ref, the source tarball of any commit.
	h.GitHub.SetGitRepo(repo, r.dir)
	for _, pr := range []struct {
		number int
		head   string
	}{{slowPR, r.Slow}, {docsPR, r.Docs}} {
		if err := h.setPR(pr.number, pr.head); err != nil {
			h.Close()
			return nil, err
		}
	}

	cfg := sc.server
	cfg.GitHub, cfg.AgentRegistrationToken, cfg.Lease, cfg.LongPoll, cfg.AppSlug = h.GitHub.AppConfig(), regToken, 30*time.Second, 2*time.Second, githubtest.AppSlug
	cfg.ChangePoints.Disabled = true // the demo runs the pass itself, once (serve.go)
	if cfg.Artifacts.Dir == "" {
		cfg.Artifacts.Dir = filepath.Join(h.work, "artifacts") // profile traces
	}
	srv, err := server.New(cfg, st, log, h.clock.now)
	if err != nil {
		h.Close()
		return nil, err
	}
	h.Server = srv
	bctx, stopBackground := context.WithCancel(ctx)
	// Stopping waits for the workers, so the store (closed later: the
	// stops run last first) never closes under one.
	h.stop = append(h.stop, func() { stopBackground(); _ = srv.Wait() })
	if err := srv.RunBackground(bctx); err != nil {
		h.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.Close()
		return nil, err
	}
	hs := srv.HTTPServer()
	go hs.Serve(srv.Listener(ln))
	h.stop = append(h.stop, func() { hs.Close() })
	h.URL = "http://" + ln.Addr().String()
	for i := range sc.agents {
		if err := h.startAgent(ctx, i); err != nil {
			h.Close()
			return nil, err
		}
	}
	return h, nil
}

// setPR makes the local GitHub know pull request number, from main to
// head: the fixture's pull request with the repository's real commits and
// the files git says the head changes.
func (h *Harness) setPR(number int, head string) error {
	pr, err := h.prJSON(number, head)
	if err != nil {
		return err
	}
	h.GitHub.SetPullRequest(repo, number, pr)
	files, err := h.Repo.changed(head)
	if err != nil {
		return err
	}
	var fs []githubtest.File
	for _, f := range files {
		fs = append(fs, githubtest.File{Filename: f, Status: "modified"})
	}
	h.GitHub.SetFiles(repo, number, fs)
	return nil
}

// prJSON is the pull_request object of the demo's pull request number.
func (h *Harness) prJSON(number int, head string) (json.RawMessage, error) {
	ev, err := h.prEvent("opened", number, head)
	if err != nil {
		return nil, err
	}
	var out struct {
		PullRequest json.RawMessage `json:"pull_request"`
	}
	if err := json.Unmarshal(ev, &out); err != nil {
		return nil, err
	}
	return out.PullRequest, nil
}

// prEvent is a pull_request webhook payload (GitHub's shape, from the
// fixture) for the demo's pull request number with the real commits.
func (h *Harness) prEvent(action string, number int, head string) ([]byte, error) {
	raw, err := fixture("pull_request/opened.json")
	if err != nil {
		return nil, err
	}
	var ev map[string]any
	if err := json.Unmarshal(raw, &ev); err != nil {
		return nil, fmt.Errorf("demo fixture: %w", err)
	}
	pr, ok := ev["pull_request"].(map[string]any)
	if !ok {
		return nil, errors.New("demo fixture: no pull_request object")
	}
	ev["action"], ev["number"], pr["number"] = action, number, number
	headObj, _ := pr["head"].(map[string]any)
	baseObj, _ := pr["base"].(map[string]any)
	if headObj == nil || baseObj == nil {
		return nil, errors.New("demo fixture: pull_request lacks head or base")
	}
	headObj["sha"], baseObj["sha"] = head, h.Repo.Main
	if number == docsPR {
		headObj["ref"], pr["title"] = "engine-docs", "Document the engine's knobs"
	}
	return json.Marshal(ev)
}

// Close stops everything, newest first.
func (h *Harness) Close() {
	for i := len(h.stop) - 1; i >= 0; i-- {
		h.stop[i]()
	}
	h.stop = nil
}

// Advance moves the server's clock forward.
func (h *Harness) Advance(d time.Duration) { h.clock.advance(d) }

// RepoConfig is the demo repository's config as main has it.
func (h *Harness) RepoConfig() (*config.Config, error) {
	body, err := os.ReadFile(filepath.Join(h.Repo.dir, filepath.FromSlash(config.DefaultPath)))
	if err != nil {
		return nil, err
	}
	return config.Parse(config.DefaultPath, body)
}

// PromoteBaseline measures main on the runner (the engine started from
// main's checkout) and promotes it as the quick tier's baseline.
func (h *Harness) PromoteBaseline(ctx context.Context) (store.Baseline, []*result.Result, error) {
	cfg, err := h.RepoConfig()
	if err != nil {
		return store.Baseline{}, nil, err
	}
	runs, err := h.measure(ctx, cfg, h.Repo.Main)
	if err != nil {
		return store.Baseline{}, nil, fmt.Errorf("measure main: %w", err)
	}
	tier, err := cfg.Tier("quick")
	if err != nil {
		return store.Baseline{}, nil, err
	}
	b, _, err := baseline.Promote(ctx, h.Store, runs, baseline.Meta{Repo: repo, Key: "quick", Version: "main-" + short(h.Repo.Main), Commit: h.Repo.Main, By: "demo", Reason: "demo baseline"}, tier)
	if err != nil {
		return store.Baseline{}, nil, fmt.Errorf("promote baseline: %w", err)
	}
	return b, runs, nil
}

// startAgent starts runner i of the demo: a fake GPU of its own, and
// command engines allowed outside a container (the demo has no Docker;
// the repository is the demo's own). It stops with the harness.
func (h *Harness) startAgent(ctx context.Context, i int) error {
	name, uuid := "demo-runner", gpuUUID
	if i > 0 {
		name, uuid = fmt.Sprintf("demo-runner-%d", i+1), fmt.Sprintf("GPU-5f2c0d1e-demo-0000-0000-%012d", i)
	}
	actx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	h.stop = append(h.stop, func() { stop(); <-done })
	card := gpu.NewFake(uuid)
	h.cards = append(h.cards, card)
	a, err := agent.New(agent.Config{
		Server: h.URL, RegistrationToken: regToken, Name: name, Labels: []string{"gpu"},
		GPU: gpu.NewFakeProvider(card), AllowUncontained: true, EngineEnv: []string{ollamaEnv},
		CacheDir: filepath.Join(h.work, "sources-"+strconv.Itoa(i)), WorkDir: h.work,
		ClaimWait: time.Second, Log: h.log,
		// The demo's engine, its client and the server share this host's
		// CPU (two cores in CI, often busy): reading tokens tens of
		// milliseconds late there is the host's, not a broken runner's.
		MaxTTFTGap: demoMaxTTFTGap,
	})
	if err != nil {
		close(done)
		return err
	}
	go func() {
		defer close(done)
		if err := a.Run(actx); err != nil && !errors.Is(err, context.Canceled) {
			h.log.Error().Err(err).Msg("demo agent stopped")
		}
	}()
	return nil
}

// DeliverPR sends a signed pull_request webhook for the demo's pull
// request number and returns the HTTP status.
func (h *Harness) DeliverPR(ctx context.Context, action string, number int, deliveryID string) (int, error) {
	head := h.Repo.Slow
	if number == docsPR {
		head = h.Repo.Docs
	}
	body, err := h.prEvent(action, number, head)
	if err != nil {
		return 0, err
	}
	return h.deliver(ctx, "pull_request", body, deliveryID)
}

// Deliver sends a webhook fixture (testdata/webhooks/<name>), signed as
// GitHub signs it, and returns the HTTP status.
func (h *Harness) Deliver(ctx context.Context, event, name, deliveryID string) (int, error) {
	body, err := fixture(name)
	if err != nil {
		return 0, err
	}
	return h.deliver(ctx, event, body, deliveryID)
}

func (h *Harness) deliver(ctx context.Context, event string, body []byte, deliveryID string) (int, error) {
	req, err := githubtest.NewDelivery(h.URL+"/api/github/hook", event, deliveryID, body, []byte(githubtest.WebhookSecret))
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		return 0, fmt.Errorf("deliver webhook: %w", err)
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// WaitCheck waits for a check run the predicate accepts; what says what
// it waits for, which a timeout repeats with the check runs it saw last.
func (h *Harness) WaitCheck(ctx context.Context, what string, done func(githubtest.CheckRun) bool) (githubtest.CheckRun, error) {
	if h.Engine != "" {
		// A real engine on a shared CPU takes minutes, not seconds, a job.
		return waitCheckFor(ctx, h.GitHub, 30*time.Minute, what, done)
	}
	return waitCheck(ctx, h.GitHub, what, done)
}

// MeasuredAt summarises the measured runs of the commit sha's jobs.
func (h *Harness) MeasuredAt(ctx context.Context, sha string) (Measured, error) {
	head, _, err := h.runsAt(ctx, sha)
	if err != nil {
		return Measured{}, err
	}
	return measured(head), nil
}

// runsAt are the measured runs of the commit sha's succeeded jobs: the
// head's, and the base side of the interleaved ones (none for a job that
// did not interleave: its base is the stored baseline).
func (h *Harness) runsAt(ctx context.Context, sha string) (head, base []*result.Result, err error) {
	jobs, err := h.Store.ListJobs(ctx, store.JobFilter{Repo: repo, HeadSHA: sha, Status: jobstate.Succeeded})
	if err != nil {
		return nil, nil, fmt.Errorf("runs of %s: %w", short(sha), err)
	}
	for _, j := range jobs {
		res, err := h.Store.ListResults(ctx, j.ID)
		if err != nil {
			return nil, nil, fmt.Errorf("runs of %s, job %d: %w", short(sha), j.ID, err)
		}
		sort.SliceStable(res, func(a, b int) bool { return res[a].RunIndex < res[b].RunIndex })
		for _, r := range res {
			if r.Kind != jobstate.KindMeasured || r.Attempt != j.Attempts {
				continue
			}
			rr, err := result.Parse(r.Samples)
			if err != nil {
				return nil, nil, fmt.Errorf("runs of %s, job %d: %w", short(sha), j.ID, err)
			}
			if r.Side == agentapi.SideBase {
				base = append(base, rr)
			} else {
				head = append(head, rr)
			}
		}
	}
	return head, base, nil
}

func measured(runs []*result.Result) Measured {
	var m Measured
	m.Runs = len(runs)
	if len(runs) == 0 {
		return m
	}
	if p := runs[0].Perfgate; p != nil {
		m.Commit, m.Tree, m.Engine, m.Sandbox = p.Environment.Commit, p.Environment.SourceTree, p.Environment.EngineImage, p.Environment.Sandbox
	}
	m.TPOTMedian, _ = gate.MedianOf(runs, "tpot_median")
	m.CPUPerToken, _ = gate.MedianOf(runs, "engine_cpu_per_token")
	return m
}

// Run runs the demo.
func Run(ctx context.Context, o Options) (*Outcome, error) {
	if o.Slowdown <= 0 {
		o.Slowdown = 1.2
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	var serve net.Listener
	withEngine, err := engineOption(o.Engine, o.Ollama)
	if err != nil {
		return nil, err
	}
	startOpts := []StartOption{WithSlowdown(o.Slowdown), WithPerfgate(o.Perfgate), withEngine}
	if o.Serve != "" {
		ln, err := net.Listen("tcp", o.Serve)
		if err != nil {
			return nil, fmt.Errorf("--serve %s: %w", o.Serve, err)
		}
		defer ln.Close()
		serve = ln
		startOpts = append(startOpts, WithPublicURL(publicURL(ln.Addr())))
	}
	h, err := Start(ctx, o.Dir, o.Log, startOpts...)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	r := h.Repo
	fmt.Fprintf(o.Out, "perfgate demo: server on %s, store %s, local GitHub on %s\n", h.URL, h.DB, h.GitHub.URL)
	fmt.Fprintf(o.Out, "repository %s (a real git repository at %s): main %s; "+r.story+"\n",
		repo, r.dir, short(r.Main), slowPR, short(r.Slow), docsPR, short(r.Docs))
	if h.Engine != "" {
		fmt.Fprintf(o.Out, "the engine is real: %s; the runner fetches each commit through the server and runs its inference_engine/serve.sh, which starts `ollama serve` and creates the model from the commit's model/Modelfile\n\n", h.Engine)
	} else {
		fmt.Fprintf(o.Out, "the runner fetches each commit through the server and starts `perfgate sim --config <checkout>/inference_engine/sim.yaml` from it\n\n")
	}
	out := &Outcome{DB: h.DB, Repo: RepoSHAs{Main: r.Main, Slow: r.Slow, Docs: r.Docs}}

	// 1. The baseline: main measured from its own checkout, promoted under
	// the baseline rules.
	fmt.Fprintf(o.Out, "1. Measuring main (%s) on the runner and promoting it as the quick-tier baseline…\n", short(r.Main))
	b, runs, err := h.PromoteBaseline(ctx)
	if err != nil {
		return nil, err
	}
	out.Baseline = measured(runs)
	out.Baseline.Identity = h.Engine
	fmt.Fprintf(o.Out, "   baseline v%d: %s\n\n", b.Version, describe(out.Baseline))
	if o.afterBaseline != nil {
		o.afterBaseline(h)
	}

	// 2. The pull request whose commit slows the engine.
	fmt.Fprintf(o.Out, "2. PR #%d (%s) changes the engine's files; GitHub sends a signed pull_request webhook…\n", slowPR, short(r.Slow))
	warn, slow, err := h.openPR(ctx, slowPR, r.Slow, "demo-delivery-1")
	if err != nil {
		return nil, err
	}
	out.Warning = warn
	out.Head = measured(slow.Head)
	out.Head.Identity = h.Engine
	fmt.Fprintf(o.Out, "   measured the head: %s\n   against the base:  %s\n", describe(out.Head), describe(out.Baseline))
	fmt.Fprintf(o.Out, "   check run %q: %s — %s (statuses: %v)\n\n", warn.Name, warn.Conclusion, warn.Title, warn.Statuses)
	fmt.Fprintf(o.Out, "----- check run summary (markdown) -----\n%s\n----------------------------------------\n\n", warn.Summary)
	if cs := h.GitHub.Comments(); len(cs) > 0 {
		fmt.Fprintf(o.Out, "----- PR comment -----\n%s\n----------------------\n\n", cs[len(cs)-1].Body)
	}

	// 3. A pull request that only edits a README next to the engine: the
	// engine from its tree is main's, and it passes.
	fmt.Fprintf(o.Out, "3. PR #%d (%s) %s; it is measured the same way…\n", docsPR, short(r.Docs), r.docsWhat)
	docs, docsNoise, err := h.openPR(ctx, docsPR, r.Docs, "demo-delivery-2")
	if err != nil {
		return nil, err
	}
	out.Docs = docs
	docsRuns := measured(docsNoise.Head)
	docsRuns.Identity = h.Engine
	fmt.Fprintf(o.Out, "   measured the head: %s\n   check run %q: %s — %s\n", describe(docsRuns), docs.Name, docs.Conclusion, docs.Title)
	for _, line := range strings.Split(docs.Summary, "\n") {
		if i := strings.Index(line, "this change had no effect on the engine"); i >= 0 {
			fmt.Fprintf(o.Out, "   %s\n", line[i:])
		}
	}
	fmt.Fprintln(o.Out)

	// 4. Nobody fixes or appeals PR #17: 48 hours later it blocks — if the
	// gate warned. An inconclusive check has no deadline and never blocks.
	next := nextSteps(slow.Phase, docsNoise.Phase)
	out.Comments = h.GitHub.Comments()
	if next.escalate {
		if out.Escalated, err = h.escalate(ctx, o.Out, warn); err != nil {
			return nil, err
		}
		out.Comments = h.GitHub.Comments()
	}
	cut := conclude(o.Out, next, slow, docsNoise, loadAverage(), h.Engine == "")
	fmt.Fprintf(o.Out, "\nThe store is kept at %s.\n", h.DB)
	if serve != nil {
		if err := h.serve(ctx, serve, o); err != nil {
			return out, err
		}
	}
	if cut != nil {
		return out, cut
	}
	return out, nil
}

// openPR delivers pull request number's opened webhook for sha, waits for
// its quick check to complete and gathers what explains the verdict.
func (h *Harness) openPR(ctx context.Context, number int, sha, delivery string) (githubtest.CheckRun, prNoise, error) {
	if code, err := h.DeliverPR(ctx, "opened", number, delivery); err != nil || code/100 != 2 {
		return githubtest.CheckRun{}, prNoise{}, fmt.Errorf("webhook: %d %w", code, err)
	}
	c, err := h.WaitCheck(ctx, fmt.Sprintf("PR #%d's quick check on %s to complete (the runner measures its head)", number, short(sha)), func(c githubtest.CheckRun) bool {
		return c.Name == "perfgate / quick" && c.HeadSHA == sha && c.Status == "completed"
	})
	if err != nil {
		return githubtest.CheckRun{}, prNoise{}, err
	}
	noise, err := h.noiseOf(ctx, number, sha)
	return c, noise, err
}

// escalate lets 48 hours pass on the injected clock and waits for warn to
// turn into a blocking failure, printing the check and the last comment.
func (h *Harness) escalate(ctx context.Context, w io.Writer, warn githubtest.CheckRun) (githubtest.CheckRun, error) {
	fmt.Fprintf(w, "4. 48 hours pass with no fix to PR #%d, passing retest or upheld appeal…\n", slowPR)
	h.Advance(48*time.Hour + time.Minute)
	if err := h.Server.Dispatch().Escalate(ctx); err != nil {
		return githubtest.CheckRun{}, fmt.Errorf("escalate after 48 hours: %w", err)
	}
	esc, err := h.WaitCheck(ctx, fmt.Sprintf("PR #%d's warning (check run %d) to turn into a blocking failure after its 48-hour deadline", slowPR, warn.ID),
		func(c githubtest.CheckRun) bool { return c.ID == warn.ID && c.Conclusion == "failure" })
	if err != nil {
		return githubtest.CheckRun{}, err
	}
	fmt.Fprintf(w, "   check run %q: %s — %s\n\n", esc.Name, esc.Conclusion, esc.Title)
	if cs := h.GitHub.Comments(); len(cs) > 0 {
		fmt.Fprintf(w, "----- PR comment -----\n%s\n----------------------\n", cs[len(cs)-1].Body)
	}
	return esc, nil
}

// noiseOf gathers what explains pull request number's verdict: its
// check's phase and title, and the verdict document stored with it.
func (h *Harness) noiseOf(ctx context.Context, number int, sha string) (prNoise, error) {
	p := prNoise{Number: number, What: "slows the engine"}
	if number == docsPR {
		p.What = "only edits a README"
	}
	cr, err := h.Store.GetCheckRun(ctx, repo, sha, "quick")
	if err != nil {
		return p, fmt.Errorf("the check of %s: %w", short(sha), err)
	}
	p.Phase = check.Phase(cr.State)
	for _, c := range h.GitHub.CheckRuns() {
		if c.HeadSHA == sha && c.Status == "completed" {
			p.Title = c.Title
		}
	}
	if len(cr.Verdict) > 0 {
		var doc struct {
			Report *gate.Report `json:"report"`
		}
		if err := json.Unmarshal(cr.Verdict, &doc); err != nil {
			return p, fmt.Errorf("the verdict document of %s: %w", short(sha), err)
		}
		p.Report = doc.Report
	}
	p.Head, _, err = h.runsAt(ctx, sha)
	return p, err
}

// describe says what was measured: the commit, the tree its engine ran
// from, and the engine's median TPOT.
func describe(m Measured) string {
	engine := engineName(m.Engine)
	if m.Identity != "" {
		engine = m.Identity + " via " + engine
	}
	cpu := ""
	if m.CPUPerToken > 0 {
		cpu = fmt.Sprintf(", engine CPU %.2f ms per output token", m.CPUPerToken)
	}
	return fmt.Sprintf("commit %s (tree %s), %d runs, median TPOT %.2f ms%s, engine %s (%s)",
		short(m.Commit), shortTree(m.Tree), m.Runs, m.TPOTMedian, cpu, engine, orNone(m.Sandbox))
}

func engineName(cmd string) string {
	f := strings.Fields(cmd)
	if len(f) > 0 {
		f[0] = filepath.Base(f[0])
	}
	return "`" + strings.Join(f, " ") + "`"
}

func shortTree(t string) string {
	t = strings.TrimPrefix(t, "sha256:")
	if len(t) > 12 {
		return t[:12]
	}
	return orNone(t)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// measure runs one quick-tier job of sha, with the plan the repository's
// config gives, on the demo's runner and returns its runs.
func (h *Harness) measure(ctx context.Context, cfg *config.Config, sha string) ([]*result.Result, error) {
	plan, err := agentapi.PlanAt(cfg, "quick", agentapi.Commits{Repo: repo, Head: sha})
	if err != nil {
		return nil, err
	}
	snap, err := json.Marshal(plan)
	if err != nil {
		return nil, fmt.Errorf("encode plan: %w", err)
	}
	job, err := h.Store.Enqueue(ctx, store.JobSpec{Tier: "quick", Kind: "nightly", Repo: repo, InstallationID: githubtest.InstallationID,
		HeadSHA: sha, BaseSHA: sha, Config: snap, Labels: cfg.Runner.Labels})
	if err != nil {
		return nil, err
	}
	limit := 3 * time.Minute
	if h.Engine != "" {
		limit = 30 * time.Minute // a real engine on a shared CPU
	}
	deadline := time.Now().Add(limit)
	var j store.Job
	for time.Now().Before(deadline) {
		if j, err = h.Store.GetJob(ctx, job.ID); err != nil {
			return nil, err
		}
		switch j.Status {
		case jobstate.Succeeded:
			return decodeRuns(ctx, h.Store, j)
		case jobstate.Failed, jobstate.Cancelled:
			return nil, fmt.Errorf("job %d %s: %s", j.ID, j.Status, j.FailureReason)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for job %d of %s (last %s, attempt %d): %w", j.ID, short(sha), j.Status, j.Attempts, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	why := ""
	if j.Status == jobstate.Queued {
		why = ": no runner claimed it"
	}
	return nil, fmt.Errorf("timed out after %s waiting for job %d to measure %s on the runner; it was last %s (attempt %d)%s",
		limit, j.ID, short(sha), j.Status, j.Attempts, why)
}

func decodeRuns(ctx context.Context, st store.Store, j store.Job) ([]*result.Result, error) {
	return decodeSide(ctx, st, j, "")
}

// decodeSide decodes a job's measured runs of its last attempt; with a
// side, only that side's runs of an interleaved job (a job that did not
// interleave has no sides and keeps all).
func decodeSide(ctx context.Context, st store.Store, j store.Job, side string) ([]*result.Result, error) {
	res, err := st.ListResults(ctx, j.ID)
	if err != nil {
		return nil, err
	}
	sort.SliceStable(res, func(a, b int) bool { return res[a].RunIndex < res[b].RunIndex })
	var runs []*result.Result
	for _, r := range res {
		if r.Kind != jobstate.KindMeasured || r.Attempt != j.Attempts || (side != "" && r.Side != "" && r.Side != side) {
			continue
		}
		rr, err := result.Parse(r.Samples)
		if err != nil {
			return nil, err
		}
		runs = append(runs, rr)
	}
	return runs, nil
}

func waitCheck(ctx context.Context, gh *githubtest.Server, what string, done func(githubtest.CheckRun) bool) (githubtest.CheckRun, error) {
	return waitCheckFor(ctx, gh, 3*time.Minute, what, done)
}

// waitCheckFor waits up to d for a check run the predicate accepts. Its
// errors say what it waited for and what the check runs said last.
func waitCheckFor(ctx context.Context, gh *githubtest.Server, d time.Duration, what string, done func(githubtest.CheckRun) bool) (githubtest.CheckRun, error) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for _, c := range gh.CheckRuns() {
			if done(c) {
				return c, nil
			}
		}
		select {
		case <-ctx.Done():
			return githubtest.CheckRun{}, fmt.Errorf("waiting for %s (%s): %w", what, lastChecks(gh.CheckRuns()), ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	return githubtest.CheckRun{}, fmt.Errorf("timed out after %s waiting for %s; %s", d, what, lastChecks(gh.CheckRuns()))
}

// lastChecks says what the newest check runs said, for a wait's error.
func lastChecks(runs []githubtest.CheckRun) string {
	if len(runs) == 0 {
		return "no check run was created: the server did not act on the webhook (run with --log-level info)"
	}
	sort.Slice(runs, func(a, b int) bool { return runs[a].ID > runs[b].ID })
	var parts []string
	for _, c := range runs[:min(3, len(runs))] {
		said := c.Status
		if c.Conclusion != "" {
			said += ", " + c.Conclusion
		}
		if c.Title != "" {
			said += fmt.Sprintf(", %q", c.Title)
		}
		parts = append(parts, fmt.Sprintf("%q on %s: %s (statuses %s)", c.Name, short(c.HeadSHA), said, strings.Join(c.Statuses, " → ")))
	}
	return "the check runs said last: " + strings.Join(parts, "; ")
}

func fixture(name string) ([]byte, error) { return githubtest.Fixture(name) }

// firstLine is s up to its first line break, for an error message.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

func short(sha string) string { return rev.Short(sha) }

// clock is the demo's time: real time plus an offset the demo advances to
// skip the 48-hour grace period.
type clock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}
