// Package demo runs perfgate's whole loop on one machine with nothing
// installed: an embedded SQLite store, the server, a local stand-in for
// GitHub's API, a runner agent with a fake GPU, and the simulated engine.
// A nightly-style run of main sets the baseline; then a pull request whose
// change makes the engine slower arrives as a signed webhook, is measured,
// warned about, and — once its 48 hours pass — escalated.
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
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/agent"
	"github.com/perfgate/perfgate/internal/agentapi"
	"github.com/perfgate/perfgate/internal/baseline"
	"github.com/perfgate/perfgate/internal/config"
	"github.com/perfgate/perfgate/internal/githubtest"
	"github.com/perfgate/perfgate/internal/gpu"
	"github.com/perfgate/perfgate/internal/result"
	"github.com/perfgate/perfgate/internal/server"
	"github.com/perfgate/perfgate/internal/store"
)

// Options shape a demo run.
type Options struct {
	Dir      string  // where the SQLite file goes (a temporary directory when empty), or a postgres:// DSN
	Slowdown float64 // how much slower the PR's engine is (1.2 = 20%)
	Out      io.Writer
	Log      zerolog.Logger
	// Serve, when set ("127.0.0.1:8080"), keeps the server up after the
	// demo on that address with a month of nightly history (serve.go).
	Serve string
	// Ready, when set, is called with the dashboard's URL once it serves
	// (tests use it; the demo then runs until ctx ends).
	Ready func(dashboardURL string)
}

// Outcome is what the demo saw, for tests.
type Outcome struct {
	Warning, Escalated githubtest.CheckRun
	Comments           []githubtest.Comment
	DB                 string
}

const (
	repo     = "acme/inference"
	prNumber = 17
	gpuUUID  = "GPU-5f2c0d1e-demo-0000-0000-000000000000"
	regToken = "demo-registration-token"
	baseSHA  = "3d2c1b0a9f8e7d6c5b4a39281706f5e4d3c2b1a0"
)

// Harness is the demo's running system: store, server, local GitHub and
// agents. The demo and the end-to-end tests drive it.
type Harness struct {
	Store  store.Store
	GitHub *githubtest.Server
	Server *server.Server
	URL    string // the perfgate server
	DB     string
	log    zerolog.Logger
	clock  *clock
	stop   []func()
}

// Start brings the system up with the demo repository (acme/inference,
// PR #17 touching inference_engine/).
func Start(ctx context.Context, dir string, log zerolog.Logger, opts ...StartOption) (*Harness, error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "perfgate-demo-")
		if err != nil {
			return nil, err
		}
		dir = d
	}
	h := &Harness{DB: filepath.Join(dir, "perfgate.db"), log: log, clock: &clock{}}
	if strings.HasPrefix(dir, "postgres://") || strings.HasPrefix(dir, "postgresql://") {
		h.DB = dir // the same loop on PostgreSQL, as several replicas would run it
	}
	st, err := store.Open(ctx, h.DB, store.WithClock(h.clock.now))
	if err != nil {
		return nil, err
	}
	h.Store = st
	h.stop = append(h.stop, func() { st.Close() })
	h.GitHub = githubtest.Start()
	h.stop = append(h.stop, h.GitHub.Close)
	pr, err := fixture("pull_request/opened.json")
	if err != nil {
		h.Close()
		return nil, err
	}
	var ev struct {
		PullRequest json.RawMessage `json:"pull_request"`
	}
	if err := json.Unmarshal(pr, &ev); err != nil {
		h.Close()
		return nil, fmt.Errorf("demo fixture: %w", err)
	}
	h.GitHub.SetPullRequest(repo, prNumber, ev.PullRequest)
	h.GitHub.SetFiles(repo, prNumber, []githubtest.File{{Filename: "inference_engine/scheduler.py", Status: "modified"}})
	h.GitHub.SetContent(repo, "main", config.DefaultPath, []byte(repoConfig))

	cfg := server.Config{GitHub: h.GitHub.AppConfig(), AgentRegistrationToken: regToken, Lease: 30 * time.Second, LongPoll: 2 * time.Second, AppSlug: githubtest.AppSlug}
	cfg.ChangePoints.Disabled = true // the demo runs the pass itself, once (serve.go)
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := server.New(cfg, st, log, h.clock.now)
	if err != nil {
		h.Close()
		return nil, err
	}
	h.Server = srv
	bctx, stopBackground := context.WithCancel(ctx)
	h.stop = append(h.stop, stopBackground)
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
	return h, nil
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

// PromoteBaseline measures main with an unslowed engine and promotes it.
func (h *Harness) PromoteBaseline(ctx context.Context) (store.Baseline, int, error) {
	runs, err := measure(ctx, h.Store, h.URL, h.log, 1.0, baseSHA)
	if err != nil {
		return store.Baseline{}, 0, fmt.Errorf("measure main: %w", err)
	}
	tier, _ := mustConfig().Tier("quick")
	b, _, err := baseline.Promote(ctx, h.Store, runs, baseline.Meta{Repo: repo, Key: "quick", Version: "main-" + baseSHA[:7], Commit: baseSHA, By: "demo", Reason: "demo baseline"}, tier)
	if err != nil {
		return store.Baseline{}, 0, fmt.Errorf("promote baseline: %w", err)
	}
	return b, len(runs), nil
}

// StartAgent starts a runner whose simulated engine has the slowdown; it
// stops with the harness or ctx.
func (h *Harness) StartAgent(ctx context.Context, slowdown float64) error {
	actx, stop := context.WithCancel(ctx)
	h.stop = append(h.stop, stop)
	return startAgent(actx, h.URL, h.log, slowdown)
}

// Deliver sends a webhook fixture (testdata/webhooks/<name>), signed as
// GitHub signs it, and returns the HTTP status.
func (h *Harness) Deliver(ctx context.Context, event, name, deliveryID string) (int, error) {
	body, err := fixture(name)
	if err != nil {
		return 0, err
	}
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

// WaitCheck waits for a check run the predicate accepts.
func (h *Harness) WaitCheck(ctx context.Context, done func(githubtest.CheckRun) bool) (githubtest.CheckRun, error) {
	return waitCheck(ctx, h.GitHub, done)
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
	var startOpts []StartOption
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
	fmt.Fprintf(o.Out, "perfgate demo: server on %s, store %s, local GitHub on %s\n\n", h.URL, h.DB, h.GitHub.URL)

	// 1. The baseline: main measured on the runner, promoted under the
	// baseline rules.
	fmt.Fprintf(o.Out, "1. Measuring main (the engine as it is) on the runner and promoting it as the quick-tier baseline…\n")
	b, n, err := h.PromoteBaseline(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Out, "   baseline v%d: %d runs of %s\n\n", b.Version, n, baseSHA[:7])

	// 2. The pull request: its engine change costs o.Slowdown.
	fmt.Fprintf(o.Out, "2. PR #%d changes inference_engine/ and makes the engine %.0f%% slower; GitHub sends a signed pull_request webhook…\n", prNumber, (o.Slowdown-1)*100)
	if err := h.StartAgent(ctx, o.Slowdown); err != nil {
		return nil, err
	}
	code, err := h.Deliver(ctx, "pull_request", "pull_request/opened.json", "demo-delivery-1")
	if err != nil {
		return nil, err
	}
	if code/100 != 2 {
		return nil, fmt.Errorf("webhook answered %d", code)
	}
	warn, err := h.WaitCheck(ctx, func(c githubtest.CheckRun) bool { return c.Name == "perfgate / quick" && c.Status == "completed" })
	if err != nil {
		return nil, err
	}
	out := &Outcome{Warning: warn, DB: h.DB}
	fmt.Fprintf(o.Out, "   check run %q: %s — %s (statuses: %v)\n\n", warn.Name, warn.Conclusion, warn.Title, warn.Statuses)
	fmt.Fprintf(o.Out, "----- check run summary (markdown) -----\n%s\n----------------------------------------\n\n", warn.Summary)
	if cs := h.GitHub.Comments(); len(cs) > 0 {
		fmt.Fprintf(o.Out, "----- PR comment -----\n%s\n----------------------\n\n", cs[len(cs)-1].Body)
	}

	// 3. Nobody fixes or appeals it: 48 hours later it blocks.
	fmt.Fprintf(o.Out, "3. 48 hours pass with no fix, passing retest or upheld appeal…\n")
	h.Advance(48*time.Hour + time.Minute)
	if err := h.Server.Dispatch().Escalate(ctx); err != nil {
		return nil, err
	}
	esc, err := h.WaitCheck(ctx, func(c githubtest.CheckRun) bool { return c.ID == warn.ID && c.Conclusion == "failure" })
	if err != nil {
		return nil, err
	}
	out.Escalated = esc
	out.Comments = h.GitHub.Comments()
	fmt.Fprintf(o.Out, "   check run %q: %s — %s\n\n", esc.Name, esc.Conclusion, esc.Title)
	if cs := out.Comments; len(cs) > 0 {
		fmt.Fprintf(o.Out, "----- PR comment -----\n%s\n----------------------\n", cs[len(cs)-1].Body)
	}
	fmt.Fprintf(o.Out, "\nThe store is kept at %s.\n", h.DB)
	if serve != nil {
		return out, h.serve(ctx, serve, o)
	}
	return out, nil
}

// measure runs one quick-tier job of sha on a short-lived agent whose
// simulated engine has the given slowdown, and returns its runs.
func measure(ctx context.Context, st store.Store, base string, log zerolog.Logger, slowdown float64, sha string) ([]*result.Result, error) {
	plan, err := agentapi.PlanFromConfig(mustConfig(), "quick")
	if err != nil {
		return nil, err
	}
	plan.Repo, plan.HeadSHA = repo, sha
	snap, _ := json.Marshal(plan)
	job, err := st.Enqueue(ctx, store.JobSpec{Tier: "quick", Kind: "nightly", Repo: repo, InstallationID: githubtest.InstallationID,
		HeadSHA: sha, BaseSHA: sha, Config: snap, Labels: mustConfig().Runner.Labels})
	if err != nil {
		return nil, err
	}
	actx, stop := context.WithCancel(ctx)
	defer stop()
	if err := startAgent(actx, base, log, slowdown); err != nil {
		return nil, err
	}
	for {
		j, err := st.GetJob(ctx, job.ID)
		if err != nil {
			return nil, err
		}
		switch j.Status {
		case store.StatusSucceeded:
			stop()
			return decodeRuns(ctx, st, j)
		case store.StatusFailed, store.StatusCancelled:
			return nil, fmt.Errorf("job %d %s: %s", j.ID, j.Status, j.FailureReason)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func decodeRuns(ctx context.Context, st store.Store, j store.Job) ([]*result.Result, error) {
	res, err := st.ListResults(ctx, j.ID)
	if err != nil {
		return nil, err
	}
	var runs []*result.Result
	for _, r := range res {
		if r.Kind != store.KindMeasured {
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

func startAgent(ctx context.Context, base string, log zerolog.Logger, slowdown float64) error {
	a, err := agent.New(agent.Config{
		Server: base, RegistrationToken: regToken, Name: fmt.Sprintf("demo-runner-%.2f", slowdown), Labels: mustConfig().Runner.Labels,
		GPU: gpu.NewFakeProvider(gpu.NewFake(gpuUUID)), Sim: &agentapi.SimEngine{Slowdown: slowdown, Seed: 7},
		ClaimWait: time.Second, Log: log,
	})
	if err != nil {
		return err
	}
	go func() {
		if err := a.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			log.Error().Err(err).Msg("demo agent stopped")
		}
	}()
	return nil
}

func waitCheck(ctx context.Context, gh *githubtest.Server, done func(githubtest.CheckRun) bool) (githubtest.CheckRun, error) {
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		for _, c := range gh.CheckRuns() {
			if done(c) {
				return c, nil
			}
		}
		select {
		case <-ctx.Done():
			return githubtest.CheckRun{}, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return githubtest.CheckRun{}, errors.New("timed out waiting for the check run")
}

func mustConfig() *config.Config {
	cfg, err := config.Parse(config.DefaultPath, []byte(repoConfig))
	if err != nil {
		panic("demo config: " + err.Error())
	}
	return cfg
}

func fixture(name string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(githubtest.FixtureDir(), filepath.FromSlash(name)))
	if err != nil {
		return nil, fmt.Errorf("read webhook fixture (run the demo from a perfgate checkout): %w", err)
	}
	return b, nil
}

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
