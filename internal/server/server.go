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
	"strings"
	"time"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/agentapi"
	"github.com/perfgate/perfgate/internal/app"
	"github.com/perfgate/perfgate/internal/artifact"
	"github.com/perfgate/perfgate/internal/backoff"
	"github.com/perfgate/perfgate/internal/bisectjob"
	"github.com/perfgate/perfgate/internal/dispatch"
	"github.com/perfgate/perfgate/internal/drift"
	"github.com/perfgate/perfgate/internal/fleet"
	"github.com/perfgate/perfgate/internal/inbox"
	"github.com/perfgate/perfgate/internal/metrics"
	"github.com/perfgate/perfgate/internal/outbox"
	"github.com/perfgate/perfgate/internal/source"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/web"
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
	arts     *artifact.Dir // nil: the server keeps no artifacts
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
	var details func(repo, sha string, tier app.Tier) string
	if cfg.PublicURL != "" {
		details = s.detailsLink // an absolute link needs the public URL
	}
	// The dispatcher needs the app's client creator and the app needs the
	// dispatcher: build the app with a forwarding dispatcher, then fill it.
	fwd := &forward{}
	s.bisects = &bisects{}
	a, err := app.New(app.Config{
		GitHub: cfg.GitHub, AppSlug: cfg.AppSlug, Logger: log, Retry: cfg.Loop.GitHubRetry,
		Unconfigured: app.Unconfigured(cfg.Unconfigured), MaxInFlightBytes: cfg.HTTP.WebhookInFlightBytes,
		ClientMiddleware: []githubapp.ClientMiddleware{cfg.Metrics.GitHubTransport}, Events: cfg.Metrics,
	}, app.Deps{Dispatcher: fwd, Inbox: storeInbox{st}, Outbox: fwd, Config: app.ContentsConfigLoader{}, Appeals: fwd, Releases: fwd,
		Approvals: fwd, Acks: fwd, Findings: fwd, Bisects: s.bisects, Accepted: func() { s.inbox.Wake() }})
	if err != nil {
		return nil, err
	}
	s.app = a
	arts, err := openArtifacts(cfg, log)
	if err != nil {
		return nil, err
	}
	s.arts = arts
	apiArts, webArts := artifactParts(arts)
	if s.web, s.drift, err = s.dashboardParts(cfg, a.ClientCreator(), webArts); err != nil {
		return nil, err
	}
	s.outbox = outbox.New(outbox.Options{Store: st, Clients: a.ClientCreator(), Policy: cfg.Loop.OutboxPolicy,
		Lease: cfg.Loop.OutboxLease, Poll: cfg.Loop.Poll, Now: now, Log: log})
	s.dispatch = dispatch.New(dispatch.Options{Store: st, Clients: a.ClientCreator(), DetailsURL: cfg.PublicURL, Details: details,
		Now: now, Log: log, Written: s.outbox.Wake, JudgePolicy: cfg.Loop.JudgePolicy, JudgePoll: cfg.Loop.Poll})
	var artifactURL func(repo string, id int64, name string) string
	if cfg.PublicURL != "" {
		artifactURL = s.web.ArtifactURL
	}
	s.dispatch.EnableFindings(dispatch.FindingsOptions{Traces: traceFiles{arts}, ArtifactURL: artifactURL})
	s.dispatch.EnableLongRun(dispatch.LongRunOptions{Files: traceFiles{arts}})
	fwd.s = s.dispatch
	s.bisects.wire(s, a.ClientCreator())
	s.inbox = inbox.New(inbox.Options{Store: st, Handler: a, Policy: cfg.Loop.InboxPolicy, Lease: cfg.Loop.InboxLease,
		Poll: cfg.Loop.Poll, Now: now, Log: log})

	mux := http.NewServeMux()
	mux.Handle(app.WebhookPath, cfg.Metrics.Webhook(newWebhookIntake(a.Handler(), cfg.HTTP.WebhookInFlightBytes)))
	agentAPI := agentapi.NewServer(st, agentapi.Options{
		RegistrationToken: cfg.AgentRegistrationToken, Lease: cfg.Lease, LongPoll: cfg.LongPoll,
		OnJobDone: s.dispatch.JobDone, Log: log, Now: now,
		Source:        source.NewGitHub(a.ClientCreator()),
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

// RunBackground runs the workers and timers until ctx ends: the inbox, the
// outbox, the judge, the reaper, the escalation and start-sync timers, the
// reconciler and the nightly schedule.
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
	go s.metrics.RunResync(ctx, s.st, metricsResync, s.log)
	go s.inbox.Run(ctx)
	go s.outbox.Run(ctx)
	go s.dispatch.RunJudge(ctx)
	go agentapi.RunReaper(ctx, s.st, s.cfg.Lease/4, s.dispatch.JobDone, s.log)
	go agentapi.RunAgentExpiry(ctx, s.st, time.Hour, time.Now, s.log)
	go s.dispatch.RunEscalations(ctx, s.cfg.EscalateEvery)
	go s.dispatch.RunStartSync(ctx, s.cfg.Loop.StartSyncEvery)
	go s.dispatch.RunQueueNotes(ctx, s.cfg.Loop.QueueNoteEvery)
	go s.dispatch.RunReconcile(ctx, s.cfg.Loop.ReconcileEvery)
	go s.runArtifactSweep(ctx, s.cfg.Loop.ArtifactSweepEvery)
	go s.bisects.resume(ctx, s.cfg.Loop.BisectResumeEvery, s.log)
	if s.cfg.NightlyCron != "" {
		stop, err := s.dispatch.ScheduleNightly(ctx, s.cfg.NightlyCron, s.cfg.NightlyRepos, s.app.ClientCreator())
		if err != nil {
			return err
		}
		go func() { <-ctx.Done(); stop() }()
	}
	if !s.cfg.ChangePoints.Disabled {
		stop, err := s.drift.Schedule(ctx)
		if err != nil {
			return err
		}
		go func() { <-ctx.Done(); stop() }()
	}
	return nil
}

// metricsResync is how often the queue gauges are re-read from the
// database.
const metricsResync = 5 * time.Minute

// storeInbox is the app's Inbox over the store.
type storeInbox struct{ st store.Store }

func (i storeInbox) Accept(ctx context.Context, id, event string, payload []byte) (bool, error) {
	a, err := i.st.AcceptDelivery(ctx, id, event, payload)
	return a == store.AcceptedDuplicate, err
}

// forward lets the app be built before the dispatcher it calls.
type forward struct{ s *dispatch.Service }

func (f *forward) RequestRun(ctx context.Context, r app.RunRequest) error {
	return f.s.RequestRun(ctx, r)
}
func (f *forward) Conclude(ctx context.Context, c app.ConcludeRequest) error {
	return f.s.Conclude(ctx, c)
}
func (f *forward) Supersede(ctx context.Context, repo string, pr int, sha string) error {
	return f.s.Supersede(ctx, repo, pr, sha)
}
func (f *forward) Close(ctx context.Context, repo string, pr int, by string) error {
	return f.s.Close(ctx, repo, pr, by)
}
func (f *forward) Comment(ctx context.Context, c app.Comment) error  { return f.s.Comment(ctx, c) }
func (f *forward) React(ctx context.Context, r app.Reaction) error   { return f.s.React(ctx, r) }
func (f *forward) Open(ctx context.Context, a app.Appeal) error      { return f.s.Open(ctx, a) }
func (f *forward) Decide(ctx context.Context, d app.Decision) error  { return f.s.Decide(ctx, d) }
func (f *forward) Approve(ctx context.Context, a app.Approval) error { return f.s.Approve(ctx, a) }
func (f *forward) Approved(ctx context.Context, repo, sha string) (bool, error) {
	return f.s.Approved(ctx, repo, sha)
}
func (f *forward) Heads(ctx context.Context, repo string, pr int) ([]app.SeenHead, error) {
	return f.s.Heads(ctx, repo, pr)
}
func (f *forward) Ack(ctx context.Context, a app.Ack) ([]app.Tier, error) { return f.s.Ack(ctx, a) }
func (f *forward) Profile(ctx context.Context, r app.ProfileRequest) (app.ProfileQueued, error) {
	return f.s.Profile(ctx, r)
}
func (f *forward) RootCause(ctx context.Context, r app.RootCauseRequest) (app.RootCauseRecorded, error) {
	return f.s.RootCause(ctx, r)
}
func (f *forward) ReleasePublished(ctx context.Context, r app.Release) error {
	return f.s.ReleasePublished(ctx, r)
}
