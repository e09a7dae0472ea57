package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"

	"github.com/perfgate/perfgate/internal/github/server"
)

func init() {
	register("deliveries", command{summary: "ask GitHub to redeliver the webhook deliveries that never reached perfgate", run: runDeliveries})
}

const deliveriesEpilog = `Subcommands:
  perfgate deliveries redeliver [--since 1h] [--dry-run] [--config server.yml]

GitHub does not send a failed delivery again by itself (perfgate down, a
timeout, a 5xx). redeliver lists the app's recent deliveries on GitHub and
asks GitHub to send again each one that failed and has not been delivered
since under the same GUID. perfgate deduplicates by GUID, so a delivery that
did arrive is not processed twice. It uses the server's app credentials
(the PERFGATE_GITHUB_APP_* variables, server.yml, or the ones the setup
stored in the data directory). Exit status: 0 ok, 1 GitHub refused, 3 usage.
`

func runDeliveries(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 || args[0] != "redeliver" {
		fs := env.flags("deliveries", "redeliver [flags]")
		fs.epilog = deliveriesEpilog
		if code, ok := fs.parse(args); !ok {
			return code
		}
		fmt.Fprintln(env.stderr, "perfgate deliveries: give a subcommand: redeliver\nRun 'perfgate deliveries -h' for details.")
		return 3
	}
	fs := env.flags("deliveries redeliver", "[--since 1h] [--dry-run] [--config server.yml]")
	since := fs.Duration("since", time.Hour, "look at deliveries GitHub attempted this long ago at most")
	dry := fs.Bool("dry-run", false, "list what would be redelivered and send nothing")
	cfgPath := fs.String("config", envOr("PERFGATE_CONFIG", ""), "server config file (YAML; env PERFGATE_CONFIG)")
	fs.epilog = deliveriesEpilog
	if code, ok := fs.parse(args[1:]); !ok {
		return code
	}
	cfg, err := server.LoadConfig(*cfgPath)
	var cerr *server.ConfigError
	if err != nil && !errors.As(err, &cerr) {
		fmt.Fprintf(env.stderr, "perfgate deliveries: %v\n", err)
		return 3
	}
	if prep, err := server.Prepare(&cfg); err != nil || prep.Setup {
		if err == nil {
			err = errors.New("no GitHub App credentials: run perfgate serve's setup first, or set the PERFGATE_GITHUB_APP_* variables")
		}
		fmt.Fprintf(env.stderr, "perfgate deliveries: %v\n", err)
		return 3
	}
	cc, err := githubapp.NewDefaultCachingClientCreator(cfg.GitHub)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate deliveries: %v\n", err)
		return 3
	}
	client, err := cc.NewAppClient()
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate deliveries: %v\n", err)
		return 3
	}
	failed, err := failedDeliveries(ctx, client, time.Now().Add(-*since))
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate deliveries: %v\n", err)
		return 1
	}
	if len(failed) == 0 {
		fmt.Fprintf(env.stdout, "No failed delivery in the last %s that was not delivered since.\n", *since)
		return 0
	}
	code := 0
	for _, d := range failed {
		what := fmt.Sprintf("%s %s.%s (GitHub answered %d at %s)", d.GetGUID(), d.GetEvent(), d.GetAction(), d.GetStatusCode(), d.GetDeliveredAt().UTC().Format(time.RFC3339))
		if *dry {
			fmt.Fprintf(env.stdout, "would redeliver %s\n", what)
			continue
		}
		// GitHub answers 202, which go-github reports as an AcceptedError.
		var accepted *github.AcceptedError
		if _, _, err := client.Apps.RedeliverHookDelivery(ctx, d.GetID()); err != nil && !errors.As(err, &accepted) {
			fmt.Fprintf(env.stderr, "redeliver %s: %v\n", what, err)
			code = 1
			continue
		}
		fmt.Fprintf(env.stdout, "redelivered %s\n", what)
	}
	return code
}

// failedDeliveries returns, newest first, the newest attempt of each
// delivery GUID since the cut-off that no attempt delivered (2xx).
func failedDeliveries(ctx context.Context, client *github.Client, cutoff time.Time) ([]*github.HookDelivery, error) {
	delivered := map[string]bool{}
	var attempts []*github.HookDelivery
	opts := &github.ListCursorOptions{PerPage: 100}
	for {
		page, resp, err := client.Apps.ListHookDeliveries(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list the app's webhook deliveries: %w", err)
		}
		older := false
		for _, d := range page {
			if d.GetDeliveredAt().Before(cutoff) {
				older = true
				break
			}
			if c := d.GetStatusCode(); c >= 200 && c < 300 {
				delivered[d.GetGUID()] = true
			}
			attempts = append(attempts, d)
		}
		if older || resp.Cursor == "" {
			break
		}
		opts.Cursor = resp.Cursor
	}
	var out []*github.HookDelivery
	seen := map[string]bool{}
	for _, d := range attempts {
		if delivered[d.GetGUID()] || seen[d.GetGUID()] {
			continue
		}
		seen[d.GetGUID()] = true
		out = append(out, d)
	}
	return out, nil
}
