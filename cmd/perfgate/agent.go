package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/runner/agent"
	"github.com/perfgate/perfgate/internal/runner/bench"
	"github.com/perfgate/perfgate/internal/runner/gpu"
	"github.com/perfgate/perfgate/internal/runner/sandbox"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
)

func init() {
	register("agent", command{summary: "run benchmark jobs from the perfgate server on this GPU host", run: runAgent})
}

func runAgent(ctx context.Context, env *cliEnv, args []string) int {
	fs := env.flags("agent", "--server URL --state-dir DIR (--token-file F | --registration-token-file F) [--labels gpu,a100] [--gpu UUID] [--models DIR]")
	server := fs.String("server", envOr("PERFGATE_SERVER", ""), "perfgate server URL, e.g. https://perfgate.example.com (env PERFGATE_SERVER)")
	token := fs.String("token", "", "this agent's own token; prefer --token-file or PERFGATE_AGENT_TOKEN: argv is visible in ps")
	tokenFile := fs.String("token-file", envOr("PERFGATE_AGENT_TOKEN_FILE", ""), "file holding a token: the server's registration token (the agent registers once and keeps its own token in --state-dir), or an agent token (pga_…) issued before; for systemd's LoadCredential (env PERFGATE_AGENT_TOKEN_FILE)")
	regToken := fs.String("registration-token", "", "the server's registration token; prefer --registration-token-file or PERFGATE_AGENT_REGISTRATION_TOKEN: argv is visible in ps")
	regTokenFile := fs.String("registration-token-file", envOr("PERFGATE_AGENT_REGISTRATION_TOKEN_FILE", ""), "file holding the server's registration token (env PERFGATE_AGENT_REGISTRATION_TOKEN_FILE; default $CREDENTIALS_DIRECTORY/registration-token when present)")
	stateDir := fs.String("state-dir", envOr("PERFGATE_AGENT_STATE_DIR", os.Getenv("STATE_DIRECTORY")), "keep the agent's identity (its token, mode 0600) and source cache here; a restart reuses them (env PERFGATE_AGENT_STATE_DIR; systemd's $STATE_DIRECTORY)")
	labels := fs.String("labels", "gpu", "comma-separated runner labels a job may require, e.g. gpu,a100")
	name := fs.String("name", "", "runner name shown on the server (default: the one saved in --state-dir, else HOST-CARD for an agent on one card, HOST otherwise, and HOST…-2, -3 when another agent on this host holds that name)")
	gpus := fs.String("gpu", "", "comma-separated GPU UUIDs this agent uses (default: every card); run one agent per card")
	models := fs.String("models", envOr("PERFGATE_AGENT_MODELS", ""), "this runner's model weights directory, mounted read-only at /models ({{.Models}}); never fetched at run time (env PERFGATE_AGENT_MODELS)")
	cacheDir := fs.String("cache-dir", "", "where commits' sources are unpacked (default: STATE-DIR/sources)")
	cacheSize := fs.String("cache-size", "20GiB", "bound of the source cache; least recently used commits are evicted")
	allowUncontained := fs.Bool("allow-uncontained", false, "let command engines (server.command) and non-docker builds run a commit's code on this host outside any container: only for repositories you trust")
	engineEnv := fs.String("engine-env", "", "comma-separated names of this agent's variables command engines may inherit beyond the default allow-list (never PERFGATE_*)")
	docker := fs.String("docker", "docker", "the docker CLI")
	buildHost := fs.String("build-host", envOr("PERFGATE_AGENT_BUILD_HOST", ""), "DOCKER_HOST of a sealed builder started by `perfgate build-daemon` (for an agent in a container; env PERFGATE_AGENT_BUILD_HOST); default: the agent starts its own, which needs root and dockerd")
	relayBin := fs.String("sandbox-relay-bin", envOr("PERFGATE_AGENT_RELAY_BIN", ""), "a static perfgate (CGO_ENABLED=0) for the sandbox relay image (default: this binary, if static)")
	engineLimits := engineLimitFlags(fs)
	fakeGPU := fs.String("fake-gpu", "", "FOR TESTING: use a simulated GPU with this UUID instead of NVML")
	noGPUDevices := fs.Bool("no-gpu-devices", false, "FOR TESTING: start engine containers without --gpus (hosts without the NVIDIA runtime)")
	useSim := fs.Bool("sim", false, "DEVELOPMENT ONLY: run every job on the built-in simulated engine instead of its configured engine")
	maxGap := fs.Duration("max-ttft-gap", bench.DefaultMaxTTFTGap, "self-check floor: how far the client's mean TTFT may sit above the engine's own before a run is client-bound (the limit is this or 5% of the engine's TTFT, whichever is larger); raise it on a runner whose engine shares the CPU or sits across a network")
	workDir := fs.String("work-dir", "", "directory for job files; relative dataset paths of jobs without a checkout are read from it")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.stderr, "perfgate agent: unexpected arguments %q\n", fs.Args())
		return 3
	}
	creds := os.Getenv("CREDENTIALS_DIRECTORY")
	files := &secretFiles{log: env.log}
	if *tokenFile != "" && *regTokenFile == "" && *regToken == "" {
		// One file for either token: an agent token has its prefix.
		v, err := files.read("token", *tokenFile)
		if err != nil {
			fmt.Fprintf(env.stderr, "perfgate agent: %v\n", err)
			return 3
		}
		if !strings.HasPrefix(v, agentapi.AgentTokenPrefix) {
			*regTokenFile, *tokenFile = *tokenFile, ""
		}
	}
	tok, err := secret("agent token", *token, *tokenFile, credential(creds, "agent-token"), "PERFGATE_AGENT_TOKEN", "", files)
	if err == nil && *token != "" {
		env.log.Warn().Msg("--token on the command line is visible to every user in ps: use --token-file or PERFGATE_AGENT_TOKEN")
	}
	var reg string
	if err == nil {
		reg, err = secret("registration token", *regToken, *regTokenFile, credential(creds, "registration-token"), "PERFGATE_AGENT_REGISTRATION_TOKEN", "PERFGATE_REGISTRATION_TOKEN", files)
		if err == nil && *regToken != "" {
			env.log.Warn().Msg("--registration-token on the command line is visible to every user in ps: use --registration-token-file or PERFGATE_AGENT_REGISTRATION_TOKEN")
		}
	}
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate agent: %v\n", err)
		return 3
	}
	if *server == "" || (tok == "" && reg == "" && !savedIdentity(*stateDir)) {
		fmt.Fprintln(env.stderr, "perfgate agent: --server and a token are required: the registration token (--registration-token-file or PERFGATE_AGENT_REGISTRATION_TOKEN) on first start, or the agent's own (--token-file, or a --state-dir that holds it)")
		fs.Usage()
		return 3
	}
	policy, err := engineLimits()
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate agent: %v\n", err)
		return 3
	}
	size, err := parseBytes(*cacheSize)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate agent: --cache-size: %v\n", err)
		return 3
	}
	if *models != "" {
		if abs, err := filepath.Abs(*models); err == nil {
			*models = abs
		}
		if fi, err := os.Stat(*models); err != nil || !fi.IsDir() {
			fmt.Fprintf(env.stderr, "perfgate agent: --models %s is not a directory\n", *models)
			return 3
		}
	}
	cfg := agent.Config{
		Server: *server, Token: tok, RegistrationToken: reg, Name: *name, StateDir: *stateDir,
		Labels: splitList(*labels), GPUs: splitList(*gpus), WorkDir: *workDir, CacheDir: *cacheDir, CacheBytes: size,
		ModelsDir: *models, AllowUncontained: *allowUncontained, EngineEnv: splitList(*engineEnv),
		Docker: *docker, BuildHost: *buildHost, RelayBin: *relayBin, NoGPUDevices: *noGPUDevices, MaxTTFTGap: *maxGap,
		Sandbox: policy,
		Log:     env.log, LogOutput: env.stderr,
	}
	if *allowUncontained {
		env.log.Warn().Msg("--allow-uncontained: command engines run pull requests' code on this host outside any container")
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

// engineLimitFlags registers the engine container's limits. Every default is
// the zero value: the sandbox fills it with what this host and its Docker
// daemon can grant (sandbox.Policy.Fit), so the agent's defaults start an
// engine on any host, and a value asked above the host's is lowered.
func engineLimitFlags(fs *flagSet) func() (sandbox.Policy, error) {
	memory := fs.String("engine-memory", "", "memory limit of an engine container (default: 3/4 of the host's memory; more than the host's is lowered to it)")
	pids := fs.Int("engine-pids-limit", 0, fmt.Sprintf("processes and threads an engine container may have (default %d)", sandbox.DefaultPidsLimit))
	shm := fs.String("engine-shm-size", "", "/dev/shm of an engine container (default: "+sandbox.DefaultShmSize+", or the memory limit if lower)")
	cpus := fs.String("engine-cpus", "", "CPU time an engine container may use, in CPUs (docker --cpus; default: the host's CPUs less two, left to the agent and the bench client; more than the host's is lowered to them)")
	cpuset := fs.String("engine-cpuset", "", "pin each card's engine to host CPUs: GPU-UUID=0-15,GPU-UUID=16-31 (':' joins ranges inside one card's list: 0-7:32-39); cards not named are not pinned")
	nofile := fs.Int("engine-nofile", 0, fmt.Sprintf("open-file ulimit of an engine container (default: %d, or the hard limit of the host, the Docker daemon or containerd if lower; a larger value is lowered to it)", sandbox.DefaultNoFile))
	nproc := fs.Int("engine-nproc", 0, fmt.Sprintf("process ulimit of an engine container, counted per user over the host; --engine-pids-limit bounds one container (default: %d, or the hard limit of the host, the Docker daemon or containerd if lower)", sandbox.DefaultNProc))
	logMax := fs.String("engine-log-max-size", "", "what Docker keeps of an engine's output, per file (json-file, 2 files; default "+sandbox.DefaultLogMaxSize+")")
	return func() (sandbox.Policy, error) {
		sets, err := sandbox.ParseCPUSets(*cpuset)
		if err != nil {
			return sandbox.Policy{}, fmt.Errorf("--engine-cpuset: %w", err)
		}
		if len(sets) == 0 {
			sets = nil
		}
		for name, v := range map[string]int{"--engine-nofile": *nofile, "--engine-nproc": *nproc, "--engine-pids-limit": *pids} {
			if v < 0 {
				return sandbox.Policy{}, fmt.Errorf("%s %d: want a positive number, or 0 for the default", name, v)
			}
		}
		for name, v := range map[string]string{"--engine-memory": *memory, "--engine-shm-size": *shm, "--engine-log-max-size": *logMax} {
			if _, err := sandbox.ParseDockerBytes(v); v != "" && err != nil {
				return sandbox.Policy{}, fmt.Errorf("%s: %w", name, err)
			}
		}
		return sandbox.Policy{Memory: *memory, PidsLimit: *pids, ShmSize: *shm, CPUs: *cpus, CPUSets: sets,
			NoFile: *nofile, NProc: *nproc, LogMaxSize: *logMax}, nil
	}
}

// secret is a token from, in order: the flag, the file flag, the
// variable, a deprecated variable (with a warning), a systemd credential.
func secret(what, flagValue, file, cred, envName, deprecated string, files *secretFiles) (string, error) {
	log := files.log
	switch {
	case flagValue != "":
		return flagValue, nil
	case file != "":
		return files.read(what, file)
	}
	if v := os.Getenv(envName); v != "" {
		return v, nil
	}
	if deprecated != "" {
		if v := os.Getenv(deprecated); v != "" {
			log.Warn().Msgf("%s is deprecated: name the %s %s, as the server does", deprecated, what, envName)
			return v, nil
		}
	}
	if cred != "" {
		return files.read(what, cred)
	}
	return "", nil
}

// secretFiles reads the token files. A file is read twice when it could
// hold either token (its prefix decides), but its mode is warned about
// once.
type secretFiles struct {
	log    zerolog.Logger
	warned map[string]bool
}

func (s *secretFiles) read(what, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the %s: %w", what, err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o007 != 0 && !s.warned[path] {
		if s.warned == nil {
			s.warned = map[string]bool{}
		}
		s.warned[path] = true
		s.log.Warn().Str("file", path).Msgf("the %s file is readable by every user: chmod o-rwx it", what)
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", fmt.Errorf("the %s file %s is empty", what, path)
	}
	return v, nil
}

// credential is a systemd credential's path when it exists.
func credential(dir, name string) string {
	if dir == "" {
		return ""
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

func savedIdentity(dir string) bool {
	if dir == "" {
		return false
	}
	_, err := os.Stat(filepath.Join(dir, "agent.json"))
	return err == nil
}

// parseBytes reads "20GiB", "500MB", "1073741824".
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a size such as 20GiB", s)
	}
	return int64(n * float64(mult)), nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
