// Package server wires perfgate's server process: the GitHub webhook, the
// agent API, health and metrics endpoints, and the background loops (lease
// reaper, escalation timer, nightly schedule), all over one store.
package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/agentapi"
	"github.com/perfgate/perfgate/internal/app"
	"github.com/perfgate/perfgate/internal/dispatch"
	"github.com/perfgate/perfgate/internal/drift"
	"github.com/perfgate/perfgate/internal/metrics"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/web"
)

// Config is the server's configuration; see Load for the file and
// environment it comes from.
type Config struct {
	Addr string `yaml:"addr"`
	// DataDir holds the SQLite database (by default) and the credentials
	// the setup flow stores.
	DataDir     string `yaml:"data_dir"`
	DatabaseURL string `yaml:"database_url"`
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

	// Dashboard and ChangePoints configure the web dashboard and the
	// nightly change-point pass (dashboard.go).
	Dashboard    DashboardConfig `yaml:"dashboard"`
	ChangePoints drift.Config    `yaml:"changepoints"`

	GitHub githubapp.Config `yaml:"github"`

	// Metrics receives the server's instrumentation; nil makes a new set.
	Metrics *metrics.Metrics `yaml:"-"`
}

// Server is the assembled process.
type Server struct {
	cfg      Config
	st       store.Store
	metrics  *metrics.Metrics
	app      *app.App
	dispatch *dispatch.Service
	handler  http.Handler
	web      *web.Handler
	drift    *drift.Pass
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
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New(now)
	}
	// Every job move and agent call passes through the store: counting
	// there keeps the queue gauges without a query per scrape.
	st = cfg.Metrics.Store(st)
	checks := app.Checks{}
	if cfg.PublicURL != "" {
		checks.DetailsURL = cfg.PublicURL
	}
	s := &Server{cfg: cfg, st: st, metrics: cfg.Metrics, log: log, now: now}
	if cfg.PublicURL != "" {
		checks.Details = s.detailsLink // an absolute link needs the public URL
	}
	// The dispatcher needs the app's client creator and the app needs the
	// dispatcher: build the app with a forwarding dispatcher, then fill it.
	fwd := &forward{}
	a, err := app.New(app.Config{GitHub: cfg.GitHub, AppSlug: cfg.AppSlug, Checks: checks, Logger: log,
		ClientMiddleware: []githubapp.ClientMiddleware{cfg.Metrics.GitHubTransport}, Events: cfg.Metrics},
		app.Deps{Dispatcher: fwd, Deliveries: st, Config: app.ContentsConfigLoader{}, Appeals: fwd, Releases: fwd})
	if err != nil {
		return nil, err
	}
	if cfg.AgentRegistrationToken == "" {
		return nil, errors.New("agent registration token is empty: set PERFGATE_AGENT_REGISTRATION_TOKEN so runner agents can register")
	}
	s.app = a
	if s.web, s.drift, err = s.dashboardParts(cfg, a.ClientCreator()); err != nil {
		return nil, err
	}
	s.dispatch = dispatch.New(dispatch.Options{Store: st, Clients: a.ClientCreator(), Checks: checks, Now: now, Log: log})
	fwd.s = s.dispatch

	mux := http.NewServeMux()
	mux.Handle(app.WebhookPath, cfg.Metrics.Webhook(a.Handler()))
	mux.Handle("/api/v1/", agentapi.NewServer(st, agentapi.Options{
		RegistrationToken: cfg.AgentRegistrationToken, Lease: cfg.Lease, LongPoll: cfg.LongPoll,
		OnJobDone: s.dispatch.JobDone, Log: log, Now: now,
	}))
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

// RunBackground runs the reaper, the escalation timer and the nightly
// schedule until ctx ends.
func (s *Server) RunBackground(ctx context.Context) error {
	// The queue gauges start from one read of the database and are re-read
	// every few minutes (other replicas move jobs too).
	if err := s.metrics.Resync(ctx, s.st); err != nil {
		s.log.Warn().Err(err).Msg("seed queue metrics")
	}
	go s.metrics.RunResync(ctx, s.st, metricsResync, s.log)
	go agentapi.RunReaper(ctx, s.st, s.cfg.Lease/4, s.dispatch.JobDone, s.log)
	go s.dispatch.RunEscalations(ctx, s.cfg.EscalateEvery)
	go s.dispatch.RunStartSync(ctx, time.Second)
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

// forward lets the app be built before the dispatcher it calls.
type forward struct{ s *dispatch.Service }

func (f *forward) RequestRun(ctx context.Context, r app.RunRequest) error {
	return f.s.RequestRun(ctx, r)
}
func (f *forward) Supersede(ctx context.Context, repo string, pr int, sha string) error {
	return f.s.Supersede(ctx, repo, pr, sha)
}
func (f *forward) Open(ctx context.Context, a app.Appeal) error     { return f.s.Open(ctx, a) }
func (f *forward) Decide(ctx context.Context, d app.Decision) error { return f.s.Decide(ctx, d) }
func (f *forward) ReleasePublished(ctx context.Context, r app.Release) error {
	return f.s.ReleasePublished(ctx, r)
}
