package main

import (
	"context"
	"fmt"

	"github.com/perfgate/perfgate/internal/runner/sandbox"
)

func init() {
	register("sandbox-relay", command{summary: "(internal) forward one port to a sandboxed engine; runs in the relay container", run: runRelay})
}

// runRelay is the relay container's entrypoint (see package sandbox): it
// accepts on --listen and forwards every connection to --to, nothing else.
func runRelay(ctx context.Context, env *cliEnv, args []string) int {
	fs := env.flags("sandbox-relay", "--to HOST:PORT [--listen ADDR]")
	listen := fs.String("listen", ":8000", "address to accept on")
	to := fs.String("to", "", "the engine's host:port on the sandbox network")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	if *to == "" || fs.NArg() > 0 {
		fmt.Fprintln(env.stderr, "perfgate sandbox-relay: --to host:port is required and nothing else")
		return 3
	}
	env.log.Info().Str("listen", *listen).Str("to", *to).Msg("relay forwarding")
	if err := sandbox.Relay(ctx, *listen, *to); err != nil {
		fmt.Fprintf(env.stderr, "perfgate sandbox-relay: %v\n", err)
		return 1
	}
	return 0
}
