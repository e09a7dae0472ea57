package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/perfgate/perfgate/internal/github/server"
)

func init() {
	register("door", command{summary: "started by perfgate serve (not by hand): answers webhooks on the server's port, passes the rest on", run: runDoor})
}

// runDoor is the door process perfgate serve starts (server.DoorMain).
func runDoor(ctx context.Context, env *cliEnv, args []string) int {
	fs := env.flags("door", "")
	fs.epilog = "perfgate serve starts this process with its port (fd 3), a pipe for its answers (fd 4) and its settings on stdin; set PERFGATE_WEBHOOK_DOOR=off to answer webhooks in the server's process instead.\n"
	if code, ok := fs.parse(args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.stderr, "perfgate door: unexpected arguments %q\n", fs.Args())
		return 3
	}
	if err := server.DoorMain(ctx, env.stdout, env.log); err != nil {
		if errors.Is(err, server.ErrNoDoorPort) {
			fmt.Fprintf(env.stderr, "perfgate door: %v\n", err)
			return 3
		}
		env.log.Error().Err(err).Msg("door stopped on an error")
		fmt.Fprintf(env.stderr, "perfgate door: %v\n", err)
		return 1
	}
	return 0
}
