package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/perfgate/perfgate/internal/server"
	"github.com/perfgate/perfgate/internal/store"
)

func init() {
	register("serve", command{summary: "run the GitHub App server: webhooks, agent API, escalations", run: runServe})
}

func runServe(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	cfgPath := fs.String("config", envOr("PERFGATE_CONFIG", ""), "server config file (YAML); PERFGATE_* variables override it")
	if err := fs.Parse(args); err != nil {
		return 3
	}
	cfg, err := server.LoadConfig(*cfgPath)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate serve: %v\n", err)
		return 3
	}
	st, err := store.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate serve: %v\n", err)
		return 1
	}
	defer st.Close()
	srv, err := server.New(cfg, st, env.log, nil)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate serve: %v\n", err)
		return 3
	}
	if err := srv.RunBackground(ctx); err != nil {
		fmt.Fprintf(env.stderr, "perfgate serve: %v\n", err)
		return 3
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate serve: listen: %v\n", err)
		return 1
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	env.log.Info().Str("addr", ln.Addr().String()).Str("db", store.Redact(cfg.DatabaseURL)).Msg("perfgate server listening")
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(env.stderr, "perfgate serve: %v\n", err)
			return 1
		}
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = hs.Shutdown(shutdown)
	_ = srv.App().Drain(shutdown)
	return 0
}
