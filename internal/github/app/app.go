// Package app is perfgate's GitHub App: the webhook endpoint, one handler per
// event, and the `/perf` comment commands. The endpoint verifies a delivery
// and stores it in the inbox before answering; a worker then runs its
// handler (Process), which parses the payload, reads what it needs from
// GitHub and records its decisions through the small interfaces in
// deps.go. Handlers write nothing to GitHub themselves: check runs,
// comments and reactions go through the outbox, so a handler retried after
// a failure does no harm and a GitHub outage loses nothing.
package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"
)

// WebhookPath is where GitHub delivers events.
const WebhookPath = githubapp.DefaultWebhookRoute

// MinSecretLength is the shortest webhook secret perfgate accepts: a
// secret is what stands between the internet and the event handlers.
const MinSecretLength = 16

// Unconfigured says what perfgate does on a repository without
// .github/perfgate.yml.
type Unconfigured string

const (
	// UnconfiguredQuiet posts nothing (the default): installing the app on
	// a whole organisation must not put checks on every repository.
	UnconfiguredQuiet Unconfigured = "quiet"
	// UnconfiguredNeutral posts a neutral "not configured" check that
	// links the documentation.
	UnconfiguredNeutral Unconfigured = "neutral"
)

// Config configures the app.
type Config struct {
	GitHub githubapp.Config
	// AppSlug is the app's URL name; comments by "<slug>[bot]" are ignored.
	AppSlug string
	// MaxBodyBytes caps a delivery's body (GitHub caps payloads at 25 MB).
	MaxBodyBytes int64
	// MaxInFlightBytes caps the webhook bodies held in memory across all
	// connections before their signatures are verified (default 64 MiB).
	MaxInFlightBytes int64
	// BodyReadTimeout bounds reading one delivery's body (default 10 s:
	// GitHub gives up after 10 s anyway).
	BodyReadTimeout time.Duration
	// InFlightWait is how long a delivery waits for room under
	// MaxInFlightBytes before it is refused with 503 (default 5 s).
	InFlightWait time.Duration
	// HandlerTimeout bounds one event's processing.
	HandlerTimeout time.Duration
	// ClientTimeout bounds one GitHub API HTTP call.
	ClientTimeout time.Duration
	Retry         RetryPolicy
	// Unconfigured: "quiet" (default) or "neutral".
	Unconfigured Unconfigured
	Logger       zerolog.Logger
	// ClientMiddleware wraps every GitHub API call inside the retries, so
	// it sees each attempt, and the installation-token fetches (metrics).
	ClientMiddleware []githubapp.ClientMiddleware
	// Events, when set, is told how each webhook event's processing ended.
	Events EventObserver
	// Clients, when set, is the GitHub client factory to use (NewClients
	// of this Config); nil builds one.
	Clients githubapp.ClientCreator
}

// EventObserver is told how long each webhook event took and whether its
// handler failed (metrics).
type EventObserver interface {
	EventHandled(event string, elapsed time.Duration, err error)
}

func (c *Config) setDefaults() {
	if c.AppSlug == "" {
		c.AppSlug = "perfgate"
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 25 << 20
	}
	if c.MaxInFlightBytes <= 0 {
		c.MaxInFlightBytes = 64 << 20
	}
	// One delivery must fit the budget, or it could never be read.
	c.MaxBodyBytes = min(c.MaxBodyBytes, c.MaxInFlightBytes)
	if c.BodyReadTimeout <= 0 {
		c.BodyReadTimeout = 10 * time.Second
	}
	if c.InFlightWait <= 0 {
		c.InFlightWait = 5 * time.Second
	}
	if c.HandlerTimeout <= 0 {
		c.HandlerTimeout = 2 * time.Minute
	}
	if c.ClientTimeout <= 0 {
		c.ClientTimeout = 30 * time.Second
	}
	if c.Retry.MaxAttempts == 0 {
		c.Retry = DefaultRetryPolicy()
	}
	if c.Unconfigured == "" {
		c.Unconfigured = UnconfiguredQuiet
	}
}

func (c *Config) validate() error {
	var problems []error
	switch secret := c.GitHub.App.WebhookSecret; {
	case secret == "":
		problems = append(problems, errors.New("webhook secret is empty: unsigned deliveries would be accepted; set PERFGATE_GITHUB_APP_WEBHOOK_SECRET to the secret configured on the GitHub App"))
	case len(strings.TrimSpace(secret)) < MinSecretLength:
		problems = append(problems, fmt.Errorf("webhook secret is shorter than %d characters: anyone could guess it; set a long random one on the GitHub App and in PERFGATE_GITHUB_APP_WEBHOOK_SECRET (e.g. openssl rand -hex 32)", MinSecretLength))
	}
	if c.GitHub.App.IntegrationID <= 0 {
		problems = append(problems, errors.New("GitHub App integration ID is not set (a positive integer from the app's settings page)"))
	}
	if c.GitHub.App.PrivateKey == "" {
		problems = append(problems, errors.New("GitHub App private key is empty (the PEM file downloaded from the app's settings page)"))
	}
	if c.GitHub.V3APIURL == "" {
		problems = append(problems, errors.New("GitHub v3 API URL is empty (https://api.github.com/ for github.com)"))
	}
	if c.Unconfigured != UnconfiguredQuiet && c.Unconfigured != UnconfiguredNeutral {
		problems = append(problems, fmt.Errorf("unconfigured repositories: %q is not quiet or neutral", c.Unconfigured))
	}
	return errors.Join(problems...)
}

// Deps are the domain services the handlers call.
type Deps struct {
	Dispatcher Dispatcher
	Inbox      Inbox
	Outbox     Outbox
	// Accepted is called after a delivery is stored (to wake the inbox
	// worker); optional.
	Accepted func()
	// Config loads per-repo config; nil means ContentsConfigLoader.
	Config ConfigLoader
	// Appeals is optional; without it `/perf appeal` answers that appeals
	// are not enabled.
	Appeals Appeals
	// Findings is optional; without it `/perf profile` and `/perf
	// rootcause` answer that they are not enabled.
	Findings Findings
	// Releases is optional; without it releases are only logged.
	Releases Releases
	// Approvals is optional; without it a fork's commit cannot be
	// approved, so it never runs.
	Approvals Approvals
	// Acks is optional; without it `/perf ack` answers that it is not
	// enabled.
	Acks Acks
	// Bisects is optional; without it `/perf bisect` answers that it is
	// not enabled.
	Bisects Bisects
}

// App is the webhook side of perfgate.
type App struct {
	cfg      Config
	deps     Deps
	clients  githubapp.ClientCreator
	handler  http.Handler
	handlers map[string]githubapp.EventHandler
	webhooks *receiver // behind handler; tests watch its budget
}

// New validates cfg and builds the app. It refuses to run without a long
// enough webhook secret.
func New(cfg Config, deps Deps) (*App, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("github app config: %w", err)
	}
	if deps.Dispatcher == nil || deps.Inbox == nil || deps.Outbox == nil {
		return nil, errors.New("github app: Dispatcher, Inbox and Outbox are required")
	}
	if deps.Config == nil {
		deps.Config = ContentsConfigLoader{}
	}
	clients := cfg.Clients
	if clients == nil {
		var err error
		if clients, err = newAppClients(cfg); err != nil {
			return nil, err
		}
	}
	a := &App{cfg: cfg, deps: deps, clients: clients, handlers: map[string]githubapp.EventHandler{}}
	b := &base{clients: clients, deps: deps, appSlug: cfg.AppSlug, appID: cfg.GitHub.App.IntegrationID, unconfigured: cfg.Unconfigured}
	for _, h := range []githubapp.EventHandler{
		&pullRequestHandler{b}, &pullRequestReviewHandler{b}, &issueCommentHandler{b},
		&checkRunHandler{b}, &checkSuiteHandler{b}, &mergeGroupHandler{b}, &installationHandler{b}, &releaseHandler{b},
	} {
		for _, ev := range h.Handles() {
			a.handlers[ev] = h
		}
	}
	a.handler, a.webhooks = newReceiver(a.ReceiverConfig(), deps.Inbox, deps.Accepted, cfg.Logger)
	return a, nil
}

// NewClients builds the GitHub client factory the app would build from
// cfg (retrying, installation authenticated, renewing a revoked token,
// cfg.ClientMiddleware around every call), so a process builds it once and
// hands the same factory to the app (Config.Clients), the dispatcher and
// the outbox.
func NewClients(cfg Config) (githubapp.ClientCreator, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("github app config: %w", err)
	}
	return newAppClients(cfg)
}

// newAppClients builds the factory of a defaulted, valid cfg.
func newAppClients(cfg Config) (githubapp.ClientCreator, error) {
	retry := RetryMiddleware(cfg.Retry)
	middleware := func(rt http.RoundTripper) http.RoundTripper {
		for i := len(cfg.ClientMiddleware) - 1; i >= 0; i-- {
			rt = cfg.ClientMiddleware[i](rt)
		}
		return rt
	}
	return newClients(cfg.GitHub, cfg.ClientTimeout, func(rt http.RoundTripper) http.RoundTripper { return retry(middleware(rt)) }, middleware)
}

// Handler serves the webhook at WebhookPath.
func (a *App) Handler() http.Handler { return a.handler }

// ClientCreator is the app's GitHub client factory (retrying, installation
// authenticated, renewing a revoked token), for the outbox and the
// dispatcher.
func (a *App) ClientCreator() githubapp.ClientCreator { return a.clients }

// Process runs the handler of one stored delivery, under its own deadline.
// An error means "try again later" unless it is backoff.Permanent.
func (a *App) Process(ctx context.Context, event, deliveryID string, payload []byte) error {
	h, ok := a.handlers[event]
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.HandlerTimeout)
	defer cancel()
	log := zerolog.Ctx(ctx)
	if log.GetLevel() == zerolog.Disabled {
		l := a.cfg.Logger.With().Str("event", event).Str("delivery", deliveryID).Logger()
		ctx = l.WithContext(ctx)
	}
	start := time.Now()
	var err error
	if env, ok := withoutInstallation(payload); ok {
		// Not the App's delivery: a token for installation 0 does not
		// exist, so acting on it could only fail, again on every retry.
		zerolog.Ctx(ctx).Warn().Str("repository", env.Repository.FullName).Str("sender", env.Sender.Login).Str("action", env.Action).
			Msg("delivery without an installation ignored: a repository or organisation webhook points at perfgate; " +
				"remove it (the repository's or organisation's Settings → Webhooks) and install the GitHub App instead, whose deliveries name their installation")
	} else {
		err = h.Handle(ctx, event, deliveryID, payload)
	}
	if a.cfg.Events != nil {
		a.cfg.Events.EventHandled(event, time.Since(start), err)
	}
	return err
}

// withoutInstallation reports whether a payload names no installation: it
// came from a repository or organisation webhook, not from the GitHub App.
// A payload that does not decode is left to its handler, which says why.
func withoutInstallation(payload []byte) (hookEnvelope, bool) {
	var env hookEnvelope
	if err := json.Unmarshal(payload, &env); err != nil {
		return env, false
	}
	return env, env.installationID() == 0
}
