package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"

	"github.com/perfgate/perfgate/internal/github/server"
)

func init() {
	register("serve", command{summary: "run the GitHub App server: webhooks, agent API, escalations (setup page on first start)", run: runServe})
}

func runServe(ctx context.Context, env *cliEnv, args []string) int {
	fs := env.flags("serve", "[--config server.yml] [flags]")
	cfgPath := fs.String("config", envOr("PERFGATE_CONFIG", ""), "server config file (YAML; env PERFGATE_CONFIG); variables override it, flags override both")
	fs.String("addr", "", "listen address (env PERFGATE_ADDR; default :8080)")
	fs.String("public-url", "", "where GitHub, browsers and agents reach this server (env PERFGATE_PUBLIC_URL)")
	fs.String("data-dir", "", "directory for the SQLite database and the stored app credentials (env PERFGATE_DATA_DIR; default .)")
	fs.String("database-url", "", "SQLite file or postgres:// URL (env PERFGATE_DATABASE_URL; default DATA_DIR/perfgate.db)")
	fs.String("github-url", "", "GitHub's web address, for GitHub Enterprise Server (env PERFGATE_GITHUB_WEB_URL; default https://github.com)")
	fs.String("github-api-url", "", "GitHub's REST API (env PERFGATE_GITHUB_V3_API_URL; default https://api.github.com/)")
	fs.epilog = serveEpilog()
	if code, ok := fs.parse(args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.stderr, "perfgate serve: unexpected arguments %q (settings are flags, variables or server.yml keys: perfgate serve -h)\n", fs.Args())
		return 3
	}
	cfg, err := server.LoadConfig(*cfgPath)
	var cerr *server.ConfigError
	if err != nil && !errors.As(err, &cerr) {
		fmt.Fprintf(env.stderr, "perfgate serve: %v\n", err)
		return 3
	}
	fs.Visit(func(f *flag.Flag) {
		dst := map[string]*string{"addr": &cfg.Addr, "public-url": &cfg.PublicURL, "data-dir": &cfg.DataDir, "database-url": &cfg.DatabaseURL,
			"github-url": &cfg.GitHub.WebURL, "github-api-url": &cfg.GitHub.V3APIURL}[f.Name]
		if dst != nil {
			*dst = f.Value.String()
		}
	})
	// Every setting is checked before anything is created: a refused
	// start leaves no database file and no directory behind.
	prep, perr := server.Prepare(&cfg)
	if cerr != nil || perr != nil {
		var problems []string
		if cerr != nil {
			problems = append(problems, cerr.Problems...)
		}
		var pe *server.ConfigError
		if errors.As(perr, &pe) {
			problems = append(problems, pe.Problems...)
		} else if perr != nil {
			problems = append(problems, perr.Error())
		}
		fmt.Fprintf(env.stderr, "perfgate serve: %v\n", &server.ConfigError{Problems: problems})
		fmt.Fprintf(env.stderr, "Every setting: perfgate serve -h\n")
		return 3
	}
	if cfg.PublicURL == "" {
		// Setup mode refuses to start without it; with the app's
		// credentials given, the server runs, but its links go nowhere.
		env.log.Warn().Str("setting", "PERFGATE_PUBLIC_URL").
			Msg("PERFGATE_PUBLIC_URL (server.yml public_url) is not set: every check run links to this server's pages and has no address to link; set it to where GitHub and browsers reach this server, e.g. https://perfgate.example.com")
	}
	// Collections less often: the webhooks' answer waits for them
	// (server.GCPercent). GOGC overrides it, GOMEMLIMIT caps the heap.
	env.log.Debug().Int("gogc", server.TuneGC()).Msg("garbage collector target")
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		fmt.Fprintf(env.stderr, "perfgate serve: data directory: %v\n", err)
		return 1
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate serve: listen on %s: %v (PERFGATE_ADDR)\n", cfg.Addr, err)
		return 1
	}
	if exe, err := os.Executable(); err == nil {
		// The door (perfgate door) answers the webhooks from a process
		// of its own unless PERFGATE_WEBHOOK_DOOR=off.
		cfg.Door = func() *exec.Cmd { return exec.Command(exe, "door") }
	}
	// A stop is logged when it is asked for (a slow drain shows why the
	// server still runs) and when it is done.
	announced := context.AfterFunc(ctx, func() {
		env.log.Info().Msg("shutting down (SIGTERM or SIGINT): no new work is taken; requests in flight get up to 30s")
	})
	defer announced()
	if err := server.Serve(ctx, cfg, prep, ln, env.log); err != nil {
		env.log.Error().Err(err).Msg("perfgate server stopped on an error")
		fmt.Fprintf(env.stderr, "perfgate serve: %v\n", err)
		return 1
	}
	ev := env.log.Info()
	if ctx.Err() != nil {
		ev = ev.Str("reason", "signal")
	}
	ev.Msg("perfgate server stopped")
	return 0
}

// serveEpilog lists every setting: variable, server.yml key, meaning.
func serveEpilog() string {
	var b strings.Builder
	b.WriteString("settings (variable / server.yml key):\n")
	for _, s := range server.Settings {
		fmt.Fprintf(&b, "  %s / %s\n      %s", s.Env, s.Key, s.Help)
		if s.Secret {
			fmt.Fprintf(&b, "; or a file named by %s_FILE", s.Env)
		}
		b.WriteString("\n")
	}
	b.WriteString(`
With no GitHub App credentials (variables, server.yml, or DATA_DIR/github-app.json)
perfgate starts in setup mode: it logs a link to /setup, whose button creates the app
on GitHub through the manifest flow; the server then starts without a restart.
`)
	return b.String()
}
