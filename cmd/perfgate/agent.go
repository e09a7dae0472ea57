package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/perfgate/perfgate/internal/agent"
	"github.com/perfgate/perfgate/internal/agentapi"
	"github.com/perfgate/perfgate/internal/gpu"
)

func init() {
	register("agent", command{summary: "run benchmark jobs from the perfgate server on this GPU host", run: runAgent})
}

func runAgent(ctx context.Context, env *cliEnv, args []string) int {
	fs := env.flags("agent", "--server URL (--token T | --registration-token T) [--labels gpu,a100] [--name NAME]")
	server := fs.String("server", envOr("PERFGATE_SERVER", ""), "perfgate server URL, e.g. https://perfgate.example.com (env PERFGATE_SERVER)")
	token := fs.String("token", envOr("PERFGATE_AGENT_TOKEN", ""), "this agent's own token (env PERFGATE_AGENT_TOKEN)")
	regToken := fs.String("registration-token", envOr("PERFGATE_REGISTRATION_TOKEN", ""), "the server's registration token: the agent registers and gets its own token (env PERFGATE_REGISTRATION_TOKEN)")
	labels := fs.String("labels", "gpu", "comma-separated runner labels a job may require, e.g. gpu,a100")
	name := fs.String("name", "", "agent name shown on the server (default: the hostname)")
	fakeGPU := fs.String("fake-gpu", "", "FOR TESTING: use a simulated GPU with this UUID instead of NVML")
	useSim := fs.Bool("sim", false, "DEVELOPMENT ONLY: run every job on the built-in simulated engine instead of its configured engine")
	workDir := fs.String("work-dir", "", "directory for job files; relative dataset paths are read from it")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.stderr, "perfgate agent: unexpected arguments %q\n", fs.Args())
		return 3
	}
	if *server == "" || (*token == "" && *regToken == "") {
		fmt.Fprintln(env.stderr, "perfgate agent: --server and one of --token or --registration-token are required")
		fs.Usage()
		return 3
	}
	cfg := agent.Config{
		Server: *server, Token: *token, RegistrationToken: *regToken, Name: *name,
		Labels: agentLabels(*labels), WorkDir: *workDir, Log: env.log, LogOutput: env.stderr,
	}
	if *fakeGPU != "" {
		env.log.Warn().Str("gpu", *fakeGPU).Msg("--fake-gpu: simulated GPU telemetry, for testing only")
		cfg.GPU = gpu.NewFakeProvider(gpu.NewFake(*fakeGPU))
	}
	if *useSim {
		cfg.Sim = &agentapi.SimEngine{}
	}
	a, err := agent.New(cfg)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate agent: %v\n", err)
		return 3
	}
	if err := a.Run(ctx); err != nil {
		env.log.Error().Err(err).Msg("agent failed")
		return 1
	}
	return 0
}

func agentLabels(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
