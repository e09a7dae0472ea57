package main

import (
	"context"
	"fmt"

	"github.com/perfgate/perfgate/internal/runner/sandbox"
)

func init() {
	register("build-daemon", command{summary: "run the sealed builder (a dockerd in a network namespace of its own) for an agent in a container", run: runBuildDaemon})
}

// runBuildDaemon runs the sealed builder an agent would start itself, for
// an agent that cannot (one in a container): it prints the builder's
// DOCKER_HOST, to give the agent as --build-host (an agent in a container
// mounts the socket at the same path), and stops the builder on a signal.
func runBuildDaemon(ctx context.Context, env *cliEnv, args []string) int {
	fs := env.flags("build-daemon", "--dir DIR [--exec-root DIR] [--socket PATH] [--dockerd BINARY] [--docker BINARY]")
	dir := fs.String("dir", "", "where the builder keeps its image store and log (required)")
	execDir := fs.String("exec-root", "/run/perfgate-builder", "the builder's exec root (removed on exit)")
	socket := fs.String("socket", "/run/perfgate-builder.sock", "the builder's socket, for the agent's --build-host unix://SOCKET (group docker)")
	dockerd := fs.String("dockerd", "dockerd", "the Docker daemon binary")
	docker := fs.String("docker", "docker", "the docker client")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	if *dir == "" || fs.NArg() > 0 {
		fmt.Fprintln(env.stderr, "perfgate build-daemon: give --dir and nothing else")
		return 3
	}
	b, err := sandbox.StartBuilder(ctx, sandbox.BuilderConfig{Dir: *dir, Dockerd: *dockerd, Docker: *docker, ExecDir: *execDir, Socket: *socket, Log: env.log})
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate build-daemon: %v\n", err)
		return 1
	}
	fmt.Fprintf(env.stdout, "--build-host %s\n", b.Host)
	<-ctx.Done()
	if err := b.Close(); err != nil {
		fmt.Fprintf(env.stderr, "perfgate build-daemon: stop: %v\n", err)
		return 1
	}
	return 0
}
