// Package app is perfgate's GitHub App: the webhook endpoint, one handler per
// event, the check runs it posts and the `/perf` comment commands. Handlers
// parse the payload, load context and call domain services through the small
// interfaces in deps.go; they know nothing of the store or the gate.
package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"
)

// WebhookPath is where GitHub delivers events.
const WebhookPath = githubapp.DefaultWebhookRoute

// Config configures the app.
type Config struct {
	GitHub githubapp.Config
	// AppSlug is the app's URL name; comments by "<slug>[bot]" are ignored.
	AppSlug string
	// MaxBodyBytes caps a delivery's body (GitHub caps payloads at 25 MB).
	MaxBodyBytes int64
	// QueueSize and Workers size the async event queue (policy-bot: 100, 10).
	QueueSize, Workers int
	// HandlerTimeout bounds one event's processing: the async context has
	// no deadline of its own.
	HandlerTimeout time.Duration
	// ClientTimeout bounds one GitHub API HTTP call.
	ClientTimeout time.Duration
	Retry         RetryPolicy
	Checks        Checks
	Logger        zerolog.Logger
	// ClientMiddleware wraps every GitHub API call inside the retries, so
	// it sees each attempt (metrics).
	ClientMiddleware []githubapp.ClientMiddleware
	// Events, when set, is told how each webhook event's processing ended.
	Events EventObserver
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
	if c.QueueSize <= 0 {
		c.QueueSize = 100
	}
	if c.Workers <= 0 {
		c.Workers = 10
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
}

func (c *Config) validate() error {
	var problems []error
	if c.GitHub.App.WebhookSecret == "" {
		problems = append(problems, errors.New("webhook secret is empty: unsigned deliveries would be accepted; set PERFGATE_GITHUB_APP_WEBHOOK_SECRET to the secret configured on the GitHub App"))
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
	return errors.Join(problems...)
}

// Deps are the domain services the handlers call.
type Deps struct {
	Dispatcher Dispatcher
	Deliveries Deliveries
	// Config loads per-repo config; nil means ContentsConfigLoader.
	Config ConfigLoader
	// Appeals is optional; without it `/perf appeal` answers that appeals
	// are not enabled.
	Appeals Appeals
	// Releases is optional; without it releases are only logged.
	Releases Releases
}

// App is the webhook side of perfgate.
type App struct {
	cfg      Config
	deps     Deps
	clients  githubapp.ClientCreator
	handler  http.Handler
	inflight sync.WaitGroup
}

// New validates cfg and builds the app. It refuses to run without a webhook
// secret, because go-githubapp accepts unsigned requests when the secret is
// empty.
func New(cfg Config, deps Deps) (*App, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("github app config: %w", err)
	}
	if deps.Dispatcher == nil || deps.Deliveries == nil {
		return nil, errors.New("github app: Dispatcher and Deliveries are required")
	}
	if deps.Config == nil {
		deps.Config = ContentsConfigLoader{}
	}
	clients, err := githubapp.NewDefaultCachingClientCreator(cfg.GitHub,
		githubapp.WithClientUserAgent("perfgate"),
		githubapp.WithClientTimeout(cfg.ClientTimeout),
		// One call: WithClientMiddleware replaces, it does not append.
		githubapp.WithClientMiddleware(append([]githubapp.ClientMiddleware{RetryMiddleware(cfg.Retry)}, cfg.ClientMiddleware...)...),
	)
	if err != nil {
		return nil, fmt.Errorf("github client creator: %w", err)
	}
	a := &App{cfg: cfg, deps: deps, clients: clients}
	b := &base{clients: clients, deps: deps, checks: cfg.Checks, appSlug: cfg.AppSlug, appID: cfg.GitHub.App.IntegrationID}
	handlers := []githubapp.EventHandler{
		&pullRequestHandler{b}, &pullRequestReviewHandler{b}, &issueCommentHandler{b},
		&checkRunHandler{b}, &checkSuiteHandler{b}, &mergeGroupHandler{b}, &installationHandler{b}, &releaseHandler{b},
	}
	for i, h := range handlers {
		handlers[i] = &deadlineHandler{EventHandler: h, timeout: cfg.HandlerTimeout, done: a.inflight.Done, events: cfg.Events}
	}
	sched := githubapp.QueueAsyncScheduler(cfg.QueueSize, cfg.Workers,
		githubapp.WithAsyncErrorCallback(func(ctx context.Context, d githubapp.Dispatch, err error) {
			zerolog.Ctx(ctx).Error().Err(err).Str("event", d.EventType).Str("delivery", d.DeliveryID).Msg("webhook handler failed")
		}))
	dispatcher := githubapp.NewEventDispatcher(handlers, cfg.GitHub.App.WebhookSecret,
		githubapp.WithScheduler(&dedupeScheduler{next: sched, deliveries: deps.Deliveries, inflight: &a.inflight}))

	mux := http.NewServeMux()
	mux.Handle(WebhookPath, verifyDelivery(cfg.GitHub.App.WebhookSecret, cfg.MaxBodyBytes, dispatcher))
	a.handler = withRequestLog(cfg.Logger, mux)
	return a, nil
}

// Handler serves the webhook at WebhookPath.
func (a *App) Handler() http.Handler { return a.handler }

// ClientCreator is the app's GitHub client factory (retrying, installation
// authenticated), for the code that later updates check runs.
func (a *App) ClientCreator() githubapp.ClientCreator { return a.clients }

// Drain waits until every accepted event has been handled, or ctx ends. Use
// it on shutdown, and in tests.
func (a *App) Drain(ctx context.Context) error {
	done := make(chan struct{})
	go func() { a.inflight.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("drain webhook handlers: %w", ctx.Err())
	}
}

// deadlineHandler gives each event its own deadline: go-githubapp's async
// context derives from context.Background and never expires.
type deadlineHandler struct {
	githubapp.EventHandler
	timeout time.Duration
	done    func()
	events  EventObserver
}

func (h *deadlineHandler) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	defer h.done()
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	start := time.Now()
	err := h.EventHandler.Handle(ctx, eventType, deliveryID, payload)
	if h.events != nil {
		h.events.EventHandled(eventType, time.Since(start), err)
	}
	return err
}

// dedupeScheduler marks the delivery GUID before queueing, so a redelivery
// of an event already accepted is acknowledged and dropped. It runs after
// go-githubapp has checked the signature, so forged deliveries cannot burn
// GUIDs.
type dedupeScheduler struct {
	next       githubapp.Scheduler
	deliveries Deliveries
	inflight   *sync.WaitGroup
}

func (s *dedupeScheduler) Schedule(ctx context.Context, d githubapp.Dispatch) error {
	log := zerolog.Ctx(ctx)
	if d.DeliveryID == "" {
		return githubapp.ValidationError{EventType: d.EventType, Cause: errors.New("missing X-GitHub-Delivery header")}
	}
	first, err := s.deliveries.MarkDelivery(ctx, d.DeliveryID, d.EventType)
	if err != nil {
		return fmt.Errorf("mark delivery %s: %w", d.DeliveryID, err)
	}
	if !first {
		log.Info().Str("delivery", d.DeliveryID).Msg("duplicate delivery ignored")
		return nil
	}
	s.inflight.Add(1)
	if err := s.next.Schedule(ctx, d); err != nil {
		s.inflight.Done()
		// The event was not queued: let a redelivery through again.
		if f, ok := s.deliveries.(interface {
			ForgetDelivery(ctx context.Context, id string) error
		}); ok {
			if ferr := f.ForgetDelivery(ctx, d.DeliveryID); ferr != nil {
				log.Error().Err(ferr).Str("delivery", d.DeliveryID).Msg("forget unqueued delivery")
			}
		}
		return err
	}
	return nil
}

// withRequestLog puts log in each request's context (go-githubapp adds the
// event and delivery fields to it) and logs one line per request.
func withRequestLog(log zerolog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r.WithContext(log.WithContext(r.Context())))
		log.Info().
			Str("method", r.Method).Str("path", r.URL.Path).
			Str("event", r.Header.Get("X-GitHub-Event")).Str("delivery", r.Header.Get("X-GitHub-Delivery")).
			Int("status", rec.status).Dur("elapsed", time.Since(start)).
			Msg("http request")
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}
