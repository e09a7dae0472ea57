package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	perfgate "github.com/perfgate/perfgate"
	"github.com/perfgate/perfgate/internal/github/metrics"
	"github.com/perfgate/perfgate/internal/github/setup"
	"github.com/perfgate/perfgate/internal/store"
)

// Launch serves on ln until ctx ends. With app credentials (prep from
// Prepare) it is the full server at once; without, it serves the setup
// page and becomes the full server, without a restart, when the manifest
// flow completes. /healthz, /readyz and /metrics answer in both modes.
// It returns only after the server's workers have stopped, so the caller
// may close st then.
func Launch(ctx context.Context, cfg Config, prep Prepared, st store.Store, ln net.Listener, log zerolog.Logger) (err error) {
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New(nil)
	}
	if prep.CreateToken {
		tok, err := setup.RegistrationToken(cfg.DataDir, true)
		if err != nil {
			return fmt.Errorf("agent registration token: %w", err)
		}
		cfg.AgentRegistrationToken = tok
		log.Info().Str("file", cfg.DataDir+"/"+setup.RegistrationTokenFile).Msg("agent registration token stored: give its content to your runner agents")
	}

	var current atomic.Pointer[http.Handler]
	var srv atomic.Pointer[Server]
	// The workers run under a context Launch ends on every return, and
	// Launch waits for them: the store outlives them.
	ctx, stopWorkers := context.WithCancel(ctx)
	defer func() {
		stopWorkers()
		if s := srv.Load(); s != nil {
			err = errors.Join(err, s.Wait())
		}
	}()
	var startMu sync.Mutex
	start := func(c Config) error {
		startMu.Lock()
		defer startMu.Unlock()
		if srv.Load() != nil {
			return errors.New("the server is already running")
		}
		s, err := New(c, st, log, nil)
		if err != nil {
			return err
		}
		if err := s.RunBackground(ctx); err != nil {
			return err
		}
		h := s.Handler()
		current.Store(&h)
		srv.Store(s)
		return nil
	}

	top := http.NewServeMux()
	top.Handle("GET /healthz", Healthz())
	top.Handle("GET /readyz", Readyz(st))
	top.Handle("GET /metrics", cfg.Metrics.Handler())
	if cfg.PublicURL != "" {
		manifest, err := setup.ParseManifest(perfgate.AppManifest)
		if err != nil {
			return err
		}
		flow, err := setup.New(setup.Options{
			Manifest: manifest, PublicURL: cfg.PublicURL, WebURL: cfg.GitHub.WebURL, APIURL: cfg.GitHub.V3APIURL,
			DataDir: cfg.DataDir, Log: log,
			Complete: func(ctx context.Context, c setup.Credentials) error {
				next := cfg
				next.GitHub.App.IntegrationID, next.GitHub.App.WebhookSecret, next.GitHub.App.PrivateKey = c.AppID, c.WebhookSecret, c.PrivateKeyPEM
				if next.GitHub.OAuth.ClientID == "" {
					next.GitHub.OAuth.ClientID, next.GitHub.OAuth.ClientSecret = c.ClientID, c.ClientSecret
				}
				if next.AppSlug == "" {
					next.AppSlug = c.Slug
				}
				if err := start(next); err != nil {
					return err
				}
				msg := "setup complete: serving webhooks"
				if cfg.Door != nil && cfg.WebhookDoor != "off" {
					msg += " from this process; the next start hands them to the door process"
				}
				log.Info().Int64("app_id", c.AppID).Str("slug", c.Slug).Msg(msg)
				return nil
			},
		})
		if err != nil {
			return err
		}
		switch {
		case prep.Stored != nil:
			flow.MarkDone(*prep.Stored)
		case !prep.Setup:
			flow.MarkDone(setup.Credentials{AppID: cfg.GitHub.App.IntegrationID, Slug: cfg.AppSlug})
		default:
			log.Warn().Str("url", flow.StartURL()).Msg("perfgate is in setup mode: open this link in a browser to create the GitHub App")
		}
		top.Handle(setup.PagePath, flow.Handler())
		top.Handle(setup.PagePath+"/", flow.Handler())
	}
	if !prep.Setup {
		if err := start(cfg); err != nil {
			return err
		}
	} else {
		h := http.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "perfgate is in setup mode: open the setup link printed in the server's log", http.StatusServiceUnavailable)
		}))
		current.Store(&h)
	}
	top.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*current.Load()).ServeHTTP(w, r) }))

	hs := httpServer(cfg, top)
	log.Info().Str("addr", ln.Addr().String()).Str("db", store.Redact(cfg.DatabaseURL)).Str("public_url", store.Redact(cfg.PublicURL)).
		Bool("setup_mode", prep.Setup).Msg("perfgate server listening")
	errc := make(chan error, 2)
	var door *doorProcess
	if s := srv.Load(); s != nil && cfg.Door != nil && cfg.WebhookDoor != "off" {
		// The door owns the port; this process serves it the rest on a
		// socket of its own. Without a door, this process answers all.
		answered := func(event string, status int) {
			cfg.Metrics.DeliveryAnswered(event, status)
			if status < 300 {
				s.Inbox().Wake()
			}
		}
		var (
			inner net.Listener
			derr  error
		)
		door, inner, derr = launchDoor(ctx, cfg, s, ln, answered, log)
		if derr != nil {
			log.Error().Err(derr).Msg("the door process did not start: this process answers the webhooks")
		} else {
			go func() { errc <- hs.Serve(inner) }()
		}
	}
	if door == nil {
		go func() { errc <- hs.Serve(limitListener(cfg, ln)) }()
	}
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	case <-ctx.Done():
	}
	if door != nil {
		// The door stops first: it stops taking connections and
		// finishes what it passed here, which this process still serves.
		stopWorkers()
		door.Wait()
	}
	// The workers stop with ctx (and the deferred stopWorkers), and Launch
	// waits for them; deliveries, GitHub writes and judgements they did not
	// finish stay in the store for the next start (or another replica).
	shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return hs.Shutdown(shutdown)
}

// launchDoor starts the door process on ln (doorproc.go) under ctx and
// returns it with the Unix socket this process serves the door on.
func launchDoor(ctx context.Context, cfg Config, s *Server, ln net.Listener, answered func(string, int), log zerolog.Logger) (*doorProcess, net.Listener, error) {
	port, err := portFile(ln)
	if err != nil {
		return nil, nil, err
	}
	inner, err := innerSocket(cfg.DataDir)
	if err != nil {
		port.Close()
		return nil, nil, fmt.Errorf("the server's socket for the door: %w", err)
	}
	ds := doorSettings{Receiver: s.App().ReceiverConfig(), JournalDir: JournalDir(cfg), Upstream: inner.Addr().String(),
		HTTP: cfg.HTTP, LongPoll: cfg.LongPoll}
	d, err := startDoor(ctx, cfg.Door, port, ds, answered, log)
	if err != nil {
		port.Close()
		inner.Close()
		return nil, nil, err
	}
	return d, inner, nil
}

// innerSocket listens on the Unix socket the door passes requests to:
// server.sock in the data directory (a stale one from a crash is
// replaced), or in a directory of its own under $TMPDIR where that path
// is too long for a socket's address. Closing it removes the file.
func innerSocket(dataDir string) (net.Listener, error) {
	dir, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "server.sock")
	if len(path) > 100 { // sun_path holds 108 bytes
		if dir, err = os.MkdirTemp("", "perfgate-"); err != nil {
			return nil, err
		}
		path = filepath.Join(dir, "server.sock")
	} else if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		_ = os.Remove(path)
	}
	return net.Listen("unix", path)
}

// Serve is perfgate serve once its settings are checked and its port is
// open: the store opened as every server opens it (the fleet's fair
// shares, this instance's name on its leases), Launch until ctx ends, the
// store closed. perfgate serve and the ack benchmark's server both run
// it, so the benchmark cannot start the server differently.
func Serve(ctx context.Context, cfg Config, prep Prepared, ln net.Listener, log zerolog.Logger) error {
	st, err := store.Open(ctx, cfg.DatabaseURL, store.WithFairShare(cfg.Fleet.Shares()), store.WithInstance(cfg.InstanceName()))
	if err != nil {
		ln.Close()
		return err
	}
	defer st.Close()
	return Launch(ctx, cfg, prep, st, ln, log)
}
