// Package server wires perfgate's server process: the GitHub webhook, the
// agent API, health and metrics endpoints, and the background workers —
// the webhook inbox, the outbox of GitHub writes, the judge of finished
// jobs, the lease reaper, the escalation timer, the reconciler and the
// nightly schedule — all over one store.
package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/perfgate/perfgate/internal/analysis/fleet"
	"github.com/perfgate/perfgate/internal/github/agentserver"
	"github.com/perfgate/perfgate/internal/github/app"
	"github.com/perfgate/perfgate/internal/github/backoff"
	"github.com/perfgate/perfgate/internal/github/bisectjob"
	"github.com/perfgate/perfgate/internal/github/dispatch"
	"github.com/perfgate/perfgate/internal/github/drift"
	"github.com/perfgate/perfgate/internal/github/inbox"
	"github.com/perfgate/perfgate/internal/github/metrics"
	"github.com/perfgate/perfgate/internal/github/outbox"
	"github.com/perfgate/perfgate/internal/github/tarball"
	"github.com/perfgate/perfgate/internal/github/web"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/check"
)

// MinTokenLength is the shortest agent registration token perfgate
// accepts: it is what lets a machine become a runner.
const MinTokenLength = 16

// Config is the server's configuration; see LoadConfig for the file and
// environment it comes from.
type Config struct {
	Addr string `yaml:"addr"`
	// DataDir holds the SQLite database (by default) and the credentials
	// the setup flow stores.
	DataDir     string `yaml:"data_dir"`
	DatabaseURL string `yaml:"database_url"`
	// Instance names this server process in the leases it takes, so a
	// restarted process reclaims its own at once (InstanceName: the host
	// name when empty). Replicas sharing a host need distinct names.
	Instance string `yaml:"instance"`
	// PublicURL is where GitHub and agents reach this server; check runs
	// link to it.
	PublicURL string `yaml:"public_url"`
	AppSlug   string `yaml:"app_slug"`
	// AgentRegistrationToken is the shared secret agents exchange for their
	// own tokens.
	AgentRegistrationToken string        `yaml:"agent_registration_token"`
	Lease                  time.Duration `yaml:"lease"`
	LongPoll               time.Duration `yaml:"long_poll"`
	// EscalateEvery is how often due warnings are escalated.
	EscalateEvery time.Duration `yaml:"escalate_every"`
	// NightlyCron is a cron expression ("0 3 * * *") for the nightly
	// matrix on each of NightlyRepos' default branch; empty disables it.
	NightlyCron  string   `yaml:"nightly_cron"`
	NightlyRepos []string `yaml:"nightly_repos"`
	// Unconfigured is what a repository without .github/perfgate.yml
	// gets: "quiet" (no check; the default) or "neutral" (a neutral "not
	// configured" check linking the docs).
	Unconfigured string `yaml:"unconfigured"`
	// HTTP bounds what one client can hold: see HTTPServer.
	HTTP HTTPConfig `yaml:"http"`
	// Fleet is how the runners are shared: fair-share tenants and weights.
	// The store applies it (store.WithFairShare(cfg.Fleet.Shares())).
	Fleet FleetConfig `yaml:"fleet"`

	// Dashboard and ChangePoints configure the web dashboard and the
	// nightly change-point pass (dashboard.go).
	Dashboard    DashboardConfig `yaml:"dashboard"`
	ChangePoints drift.Config    `yaml:"changepoints"`
	// Artifacts is where profile traces are kept (artifacts.go).
	Artifacts ArtifactsConfig `yaml:"artifacts"`

	GitHub githubapp.Config `yaml:"github"`

	// Loop tunes the background workers' timing; tests shrink it.
	Loop LoopConfig `yaml:"-"`

	// Metrics receives the server's instrumentation; nil makes a new set.
	Metrics *metrics.Metrics `yaml:"-"`

	// WebhookDoor is "process" (perfgate serve's default: a process of
	// its own owns the port and answers the webhooks, door.go) or "off"
	// (this process answers them).
	WebhookDoor string `yaml:"webhook_door"`
	// Door makes the command that runs the door process (perfgate door,
	// or a test binary); Launch runs it when WebhookDoor is not "off".
	// nil: this process answers the webhooks.
	Door func() *exec.Cmd `yaml:"-"`
}

// HTTPConfig bounds the HTTP server.
type HTTPConfig struct {
	// ReadTimeout bounds reading one request, body included (default 1m).
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// WriteTimeout bounds one response (default: the long poll plus 1m).
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// IdleTimeout closes an idle keep-alive connection (default 1m).
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxConnections caps open connections (default 1024); more wait to
	// be accepted.
	MaxConnections int `yaml:"max_connections"`
	// WebhookInFlightBytes caps webhook bodies held before their signature
	// is verified, across all connections (default 64 MiB), charged as the
	// bytes arrive.
	WebhookInFlightBytes int64 `yaml:"webhook_inflight_bytes"`
	// MaxConnectionsPerIP caps one address's open connections; 0 (the
	// default) sets no cap, as a reverse proxy in front needs.
	MaxConnectionsPerIP int `yaml:"max_connections_per_ip"`
}

// LoopConfig is the timing of the background workers. Zero values are the
// production defaults.
type LoopConfig struct {
	Poll           time.Duration  // how often idle workers look for due rows (1 s)
	InboxLease     time.Duration  // how long a delivery's worker holds it (3 m)
	OutboxLease    time.Duration  // how long one GitHub write may take (2 m)
	InboxPolicy    backoff.Policy // delivery retries (1 s doubling to 10 m, 15 attempts)
	OutboxPolicy   backoff.Policy // GitHub write retries (1 s doubling to 10 m, no limit)
	JudgePolicy    backoff.Policy // judging retries (1 s doubling to 2 m, 8 attempts)
	GitHubRetry    app.RetryPolicy
	ReconcileEvery time.Duration // how often open checks are reconciled (1 m)
	StartSyncEvery time.Duration // how often claimed jobs start their checks (1 s)
	QueueNoteEvery time.Duration // how often queued checks' positions are estimated (20 s)
	// ArtifactSweepEvery is how often the artifact retention sweep runs (1 h).
	ArtifactSweepEvery time.Duration
	// BisectResumeEvery is how often running bisects are looked over (1 m);
	// BisectCardGrace how long a bisect job waits for a pinned card that
	// is gone before the bisect stops (bisectjob.DefaultCardGrace, 15 m).
	BisectResumeEvery time.Duration
	BisectCardGrace   time.Duration
}

// FleetConfig shares the runners between repositories.
type FleetConfig struct {
	// ShareBy is "repository" (the default: each repository its own
	// tenant) or "installation" (all of a GitHub account's repositories
	// one tenant).
	ShareBy string `yaml:"share_by"`
	// Weights maps "owner/name" (or "owner": the default for the owner's
	// repositories, or the installation's weight) to a positive weight; 1
	// when absent.
	Weights map[string]float64 `yaml:"weights"`
}

// Shares is the fair-share policy the store applies.
func (f FleetConfig) Shares() fleet.Shares {
	return fleet.Shares{By: f.ShareBy, Weights: f.Weights}
}

// Server is the assembled process.
type Server struct {
	cfg      Config
	st       store.Store
	metrics  *metrics.Metrics
	app      *app.App
	dispatch *dispatch.Service
	inbox    *inbox.Worker
	outbox   *outbox.Sender
	handler  http.Handler
	web      *web.Handler
	drift    *drift.Pass
	bisects  *bisects
	arts     artifactStore // nil: the server keeps no artifacts
	clients  githubapp.ClientCreator
	workers  errgroup.Group // RunBackground's; Wait waits for them
	log      zerolog.Logger
	now      func() time.Time
}

// New assembles the server over an open store. now is the clock (time.Now
// in production; the demo and tests move it forward).
func New(cfg Config, st store.Store, log zerolog.Logger, now func() time.Time) (*Server, error) {
	if now == nil {
		now = time.Now
	}
	if cfg.EscalateEvery <= 0 {
		cfg.EscalateEvery = time.Minute
	}
	if cfg.Lease <= 0 {
		cfg.Lease = agentapi.DefaultLease
	}
	if cfg.LongPoll <= 0 {
		cfg.LongPoll = agentapi.DefaultLongPoll
	}
	cfg.HTTP.setDefaults(cfg.LongPoll)
	if cfg.Loop.ReconcileEvery <= 0 {
		cfg.Loop.ReconcileEvery = time.Minute
	}
	if cfg.Loop.StartSyncEvery <= 0 {
		cfg.Loop.StartSyncEvery = time.Second
	}
	if cfg.Loop.QueueNoteEvery <= 0 {
		cfg.Loop.QueueNoteEvery = 20 * time.Second
	}
	if cfg.Loop.ArtifactSweepEvery <= 0 {
		cfg.Loop.ArtifactSweepEvery = artifactSweepEvery
	}
	if cfg.Loop.BisectResumeEvery <= 0 {
		cfg.Loop.BisectResumeEvery = bisectResumeEvery
	}
	if cfg.Loop.BisectCardGrace <= 0 {
		cfg.Loop.BisectCardGrace = bisectjob.DefaultCardGrace
	}
	switch tok := cfg.AgentRegistrationToken; {
	case tok == "":
		return nil, errors.New("agent registration token is empty: set PERFGATE_AGENT_REGISTRATION_TOKEN so runner agents can register")
	case len(strings.TrimSpace(tok)) < MinTokenLength:
		return nil, fmt.Errorf("agent registration token is shorter than %d characters: anyone could guess it and register a runner; set a long random PERFGATE_AGENT_REGISTRATION_TOKEN (e.g. openssl rand -hex 32)", MinTokenLength)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New(now)
	}
	// Every job move and agent call passes through the store: counting
	// there keeps the queue gauges without a query per scrape.
	st = cfg.Metrics.Store(st)
	if err := registerLoopMetrics(cfg.Metrics.Registry(), st); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, st: st, metrics: cfg.Metrics, log: log, now: now}
	var details func(repo, sha string, tier check.Tier) string
	if cfg.PublicURL != "" {
		details = s.detailsLink // an absolute link needs the public URL
	}
	// One GitHub client factory for the app, the outbox, the dispatcher,
	// the bisects, the dashboard and the source route; built first, so
	// each part is built once, after the parts it calls.
	appCfg := app.Config{
		GitHub: cfg.GitHub, AppSlug: cfg.AppSlug, Logger: log, Retry: cfg.Loop.GitHubRetry,
		Unconfigured: app.Unconfigured(cfg.Unconfigured), MaxInFlightBytes: cfg.HTTP.WebhookInFlightBytes,
		ClientMiddleware: []githubapp.ClientMiddleware{cfg.Metrics.GitHubTransport}, Events: cfg.Metrics,
	}
	clients, err := app.NewClients(appCfg)
	if err != nil {
		return nil, err
	}
	appCfg.Clients, s.clients = clients, clients
	s.outbox = outbox.New(outbox.Options{Store: st, Clients: clients, Policy: cfg.Loop.OutboxPolicy,
		Lease: cfg.Loop.OutboxLease, Poll: cfg.Loop.Poll, Now: now, Log: log})
	s.dispatch = dispatch.New(dispatch.Options{Store: st, Clients: clients, DetailsURL: cfg.PublicURL, Details: details,
		Now: now, Log: log, Written: s.outbox.Wake, JudgePolicy: cfg.Loop.JudgePolicy, JudgePoll: cfg.Loop.Poll,
		CardGrace: cfg.Loop.BisectCardGrace})
	s.bisects = newBisects(s, clients)
	arts, err := openArtifacts(cfg, st, log)
	if err != nil {
		return nil, err
	}
	s.arts = arts
	apiArts, webArts := artifactParts(arts)
	if s.web, s.drift, err = s.dashboardParts(cfg, clients, webArts); err != nil {
		return nil, err
	}
	var artifactURL func(repo string, id int64, name string) string
	if cfg.PublicURL != "" {
		artifactURL = s.web.ArtifactURL
	}
	s.dispatch.EnableFindings(dispatch.FindingsOptions{Traces: traceFiles{arts}, ArtifactURL: artifactURL})
	s.dispatch.EnableLongRun(dispatch.LongRunOptions{Files: traceFiles{arts}})
	a, err := app.New(appCfg, app.Deps{Dispatcher: s.dispatch, Inbox: newStoreInbox(st), Outbox: s.dispatch, Config: app.ContentsConfigLoader{},
		Appeals: s.dispatch, Releases: s.dispatch, Approvals: s.dispatch, Acks: s.dispatch, Findings: s.dispatch, Bisects: s.bisects.asker,
		Accepted: func() { s.inbox.Wake() }}) // the inbox, built next, runs the app's handlers
	if err != nil {
		return nil, err
	}
	s.app = a
	// The door's journal is folded wherever there is a data directory:
	// one left by a door before a restart with the door off included.
	var fold *inbox.Journal
	if cfg.DataDir != "" {
		fold = &inbox.Journal{Dir: JournalDir(cfg), Store: st, Log: log}
	}
	s.inbox = inbox.New(inbox.Options{Store: st, Handler: a, Policy: cfg.Loop.InboxPolicy, Lease: cfg.Loop.InboxLease,
		Poll: cfg.Loop.Poll, Now: now, Log: log, Journal: fold})

	mux := http.NewServeMux()
	mux.Handle(app.WebhookPath, cfg.Metrics.Webhook(newWebhookIntake(a.Handler(), cfg.HTTP.WebhookInFlightBytes)))
	agentAPI := agentserver.NewServer(st, agentserver.Options{
		RegistrationToken: cfg.AgentRegistrationToken, Lease: cfg.Lease, LongPoll: cfg.LongPoll,
		OnJobDone: s.dispatch.JobDone, Log: log, Now: now,
		Source:        tarball.NewGitHub(clients),
		ArtifactFiles: apiArts, ArtifactRows: st,
	})
	mux.Handle("/api/v1/", agentBodyLimits(agentAPI))
	// An artifact's body is capped by the artifact store itself (413 with
	// the cap), not by the small default of the other routes.
	mux.Handle("POST /api/v1/jobs/{id}/artifacts", agentAPI)
	mux.Handle("GET /healthz", Healthz())
	mux.Handle("GET /readyz", Readyz(st))
	mux.Handle("GET /metrics", cfg.Metrics.Handler())
	mux.Handle("/", s.web) // the dashboard and its read API
	s.handler = mux
	return s, nil
}

// Handler serves every endpoint.
func (s *Server) Handler() http.Handler { return s.handler }

// Dispatch is the domain service (the demo and tests drive its timers).
func (s *Server) Dispatch() *dispatch.Service { return s.dispatch }

// Web is the dashboard (links, tests).
func (s *Server) Web() *web.Handler { return s.web }

// ChangePoints is the nightly change-point pass (the demo runs it once).
func (s *Server) ChangePoints() *drift.Pass { return s.drift }

// App is the GitHub side.
func (s *Server) App() *app.App { return s.app }

// Inbox is the webhook inbox worker (tests run its passes).
func (s *Server) Inbox() *inbox.Worker { return s.inbox }

// Outbox is the sender of GitHub writes (tests run its passes).
func (s *Server) Outbox() *outbox.Sender { return s.outbox }

// InstanceName is Instance, or the host name.
func (c Config) InstanceName() string {
	if c.Instance != "" {
		return c.Instance
	}
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	return h
}

// RunBackground starts the workers and timers, which run until ctx ends:
// the inbox, the outbox, the judge, the reaper, the escalation and
// start-sync timers, the reconciler, the bisects' resumer, the artifact
// sweep and the nightly and change-point schedules. They run under one
// errgroup; Wait returns once every one of them has returned, so a caller
// closes the store only after Wait (Launch does).
func (s *Server) RunBackground(ctx context.Context) error {
	// Work this instance held when it died is taken up now, not when its
	// leases lapse minutes later.
	if got, err := s.st.ReclaimLeases(ctx); err != nil {
		s.log.Warn().Err(err).Msg("reclaim the leases held before a restart")
	} else if got != (store.Reclaimed{}) {
		s.log.Info().Int64("deliveries", got.Deliveries).Int64("outbox_writes", got.Effects).Int64("judgements", got.Judgements).
			Msg("reclaimed the work held before a restart")
	}
	// The queue gauges start from one read of the database and are re-read
	// every few minutes (other replicas move jobs too).
	if err := s.metrics.Resync(ctx, s.st); err != nil {
		s.log.Warn().Err(err).Msg("seed queue metrics")
	}
	// The schedules are set up first: a bad cron expression starts nothing.
	var stops []func()
	if s.cfg.NightlyCron != "" {
		stop, err := s.dispatch.ScheduleNightly(ctx, s.cfg.NightlyCron, s.cfg.NightlyRepos, s.clients)
		if err != nil {
			return err
		}
		stops = append(stops, stop)
	}
	if !s.cfg.ChangePoints.Disabled {
		stop, err := s.drift.Schedule(ctx)
		if err != nil {
			for _, stop := range stops {
				stop()
			}
			return err
		}
		stops = append(stops, stop)
	}
	g := &s.workers
	worker := func(run func(context.Context)) { g.Go(func() error { run(ctx); return nil }) }
	worker(func(ctx context.Context) { s.metrics.RunResync(ctx, s.st, metricsResync, s.log) })
	worker(s.inbox.Run)
	worker(s.outbox.Run)
	worker(s.dispatch.RunJudge)
	worker(func(ctx context.Context) { agentserver.RunReaper(ctx, s.st, s.cfg.Lease/4, s.dispatch.JobDone, s.log) })
	worker(func(ctx context.Context) { agentserver.RunAgentExpiry(ctx, s.st, time.Hour, time.Now, s.log) })
	worker(func(ctx context.Context) { s.dispatch.RunEscalations(ctx, s.cfg.EscalateEvery) })
	worker(func(ctx context.Context) { s.dispatch.RunStartSync(ctx, s.cfg.Loop.StartSyncEvery) })
	worker(func(ctx context.Context) { s.dispatch.RunQueueNotes(ctx, s.cfg.Loop.QueueNoteEvery) })
	worker(func(ctx context.Context) { s.dispatch.RunReconcile(ctx, s.cfg.Loop.ReconcileEvery) })
	worker(func(ctx context.Context) { s.runArtifactSweep(ctx, s.cfg.Loop.ArtifactSweepEvery) })
	worker(func(ctx context.Context) { s.bisects.resume(ctx, s.cfg.Loop.BisectResumeEvery, s.log) })
	for _, stop := range stops {
		// A schedule's stop waits for the run in progress.
		worker(func(ctx context.Context) { <-ctx.Done(); stop() })
	}
	return nil
}

// Wait blocks until every worker RunBackground started has returned (they
// return once its ctx ends). Close the store only after it.
func (s *Server) Wait() error { return s.workers.Wait() }

// metricsResync is how often the queue gauges are re-read from the
// database.
const metricsResync = 5 * time.Minute
