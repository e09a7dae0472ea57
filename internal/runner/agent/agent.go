// Package agent is the runner on a GPU host (`perfgate agent`): it claims
// jobs from the perfgate server, fetches the commits a job measures through
// the server (it never holds a GitHub credential), builds and starts the
// engine from each commit's checkout inside the sandbox on one card, warms
// it up, runs the measured repeats — interleaving base and head when the
// plan asks — with GPU telemetry, uploads each result as it ends and
// streams the job's log, then stops the engine and finishes the job.
//
// What runs on the host is the server's plan, the snapshot of the base
// branch's configuration; the pull request's code runs only in the
// sandbox, unless the runner's own configuration allows uncontained
// command engines.
package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/analysis/fleet"
	"github.com/perfgate/perfgate/internal/runner/engine"
	"github.com/perfgate/perfgate/internal/runner/gpu"
	"github.com/perfgate/perfgate/internal/runner/sandbox"
	"github.com/perfgate/perfgate/internal/runner/source"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
)

// DefaultClaimWait is how long one claim long-polls.
const DefaultClaimWait = 30 * time.Second

// DefaultCancelPoll is how often a running job asks the server whether it
// was cancelled (the lease heartbeat): a superseded job stops within it.
const DefaultCancelPoll = 3 * time.Second

// Config configures an agent.
type Config struct {
	Server string // the perfgate server's base URL
	// Token is the agent's own token; with RegistrationToken instead the
	// agent registers on start (and again if the server forgets it).
	Token             string
	RegistrationToken string
	// Name is the runner's name on the server. Empty: the one saved in
	// StateDir, else a default unique per card on this host (see
	// defaultName).
	Name   string
	Labels []string
	// Host is this machine's name (os.Hostname when empty); LockDir holds
	// the locks that keep agents on one host from taking one name
	// (os.TempDir() when empty).
	Host, LockDir string
	// StateDir, when set, keeps the agent's identity: the token from its
	// first registration is saved there (mode 0600) and reused on restart,
	// so the agent keeps its row on the server. Its source cache lives
	// there too unless CacheDir says otherwise.
	StateDir string
	// GPU opens the host's cards; nil opens NVML, and a host without it
	// runs jobs with telemetry marked unavailable.
	GPU gpu.Provider
	// GPUs, when set, are the only cards (by UUID) this agent uses: one
	// agent per card on a host with several.
	GPUs []string
	// Sim, when set, replaces every plan's engine with the built-in
	// simulated engine: for development without a GPU, never a measurement.
	Sim *agentapi.SimEngine
	// WorkDir holds job files; a plan's relative dataset path is read from
	// it when the job has no checkout. The current directory when empty.
	WorkDir string
	// CacheDir holds the unpacked commits (StateDir/sources, else
	// WorkDir/sources, else the user cache directory); CacheBytes bounds it
	// (source.DefaultCacheBytes when 0); SourceLimits bounds one tree.
	CacheDir     string
	CacheBytes   int64
	SourceLimits source.Limits
	// ModelsDir is the runner's model weights, mounted read-only into the
	// engine ({{.Models}}); never fetched at run time.
	ModelsDir string
	// AllowUncontained lets command engines run a commit's code on the host
	// outside any container: for runners whose repositories are trusted.
	// Results record it, and the check run says so.
	AllowUncontained bool
	// Sandbox contains image engines; EngineEnv names extra variables of
	// the agent's environment command engines may inherit (never
	// PERFGATE_*).
	Sandbox   sandbox.Policy
	EngineEnv []string
	// Docker is the docker CLI ("docker" when empty); RelayBin is a static
	// perfgate for the sandbox relay image (this binary when static).
	Docker   string
	RelayBin string
	// BuildHost is the DOCKER_HOST of a sealed builder started by someone
	// else (`perfgate build-daemon`, for an agent in a container); empty,
	// the agent starts its own (sandbox.StartBuilder, needs root and
	// dockerd) in BuilderDir (StateDir/builder, else next to the source
	// cache) at its first `docker build`.
	BuildHost  string
	BuilderDir string
	// NoGPUDevices starts image engines without --gpus, for hosts without
	// the NVIDIA container runtime: tests only, never a measurement.
	NoGPUDevices bool
	// MaxTTFTGap is this runner's floor for how far the client's mean TTFT
	// may sit above the engine's own before a run is client-bound (0:
	// bench.DefaultMaxTTFTGap). It belongs to the runner, not the plan: a
	// runner whose engine shares its CPU, or sits across a network, reads
	// tokens later than one beside a GPU.
	MaxTTFTGap time.Duration
	Log        zerolog.Logger
	// LogOutput, when set, also gets every job log line (JSON), so the
	// agent's own output shows what the server's job log shows, up to the
	// job log's own cap (agentapi.MaxJobLog).
	LogOutput io.Writer
	// EngineOutput bounds the engines' output copied into one job's log,
	// all its engine starts together; engine.DefaultOutputLimit when 0.
	EngineOutput int64

	ClaimWait      time.Duration    // DefaultClaimWait when 0
	Backoff        agentapi.Backoff // the API client's retry shape
	CallTimeout    time.Duration    // one API call's deadline; 30 s when 0
	SampleInterval time.Duration    // gpu.DefaultInterval when 0
	// LogFlush is how often the job log is sent; 1 s when 0.
	LogFlush time.Duration
	// CancelPoll is how often a running job checks for cancellation;
	// DefaultCancelPoll when 0 (and never slower than a quarter lease).
	CancelPoll time.Duration
}

// Agent runs jobs one at a time.
type Agent struct {
	cfg    Config
	client *agentapi.Client
	gpus   []string
	cards  []fleet.Card // the GPUs as the server is told of them
	host   string
	cache  *source.Cache

	id identity // the state directory's and the name's locks, held until Run returns

	stateMu sync.Mutex
	state   state // what the state directory holds: the identity and any registration not yet answered

	relayMu sync.Mutex
	relay   string
	starts  int // engine starts, to name containers uniquely

	builderMu sync.Mutex
	builder   *sandbox.Builder // started at the first docker build
	// jobOutput is the running job's engine output budget (jobs run one
	// at a time).
	jobOutput *engine.OutputBudget
}

// New checks the configuration, reads the state directory and opens the
// GPUs; Run starts work.
func New(cfg Config) (_ *Agent, err error) {
	host := cfg.Host
	if host == "" {
		host, _ = os.Hostname()
	}
	if cfg.LockDir == "" {
		cfg.LockDir = os.TempDir()
	}
	var id identity
	defer func() {
		if err != nil {
			id.release()
		}
	}()
	if err := id.lockStateDir(cfg.StateDir); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	cfg.fillDefaults()
	// Every engine limit fits what this host and its Docker daemon grant:
	// a ulimit above the daemon's hard limit fails every container start.
	var lowered []string
	cfg.Sandbox, lowered = cfg.Sandbox.Fit(sandbox.CurrentHost())
	for _, l := range lowered {
		cfg.Log.Warn().Str("limit", l).Msg("an engine limit asked for is more than this host grants: lowered")
	}
	for _, k := range cfg.EngineEnv {
		if sandbox.Forbidden(k) {
			return nil, fmt.Errorf("agent: engine variable %s: PERFGATE_* variables never reach an engine", k)
		}
	}
	saved, err := cfg.savedIdentity()
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if cfg.GPU == nil {
		p, err := gpu.OpenNVML(cfg.Log)
		if err != nil {
			cfg.Log.Warn().Err(err).Msg("no NVML: jobs run with GPU telemetry marked unavailable and the card unchecked")
		} else {
			cfg.GPU = p
		}
	}
	a := &Agent{cfg: cfg, host: host}
	if err := a.listGPUs(); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if a.cfg.Name == "" {
		if a.cfg.Name, err = id.defaultName(cfg.LockDir, host, a.gpus); err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
		if a.cfg.Name != host && len(a.gpus) != 1 && len(a.gpus) > 0 {
			cfg.Log.Warn().Str("agent", a.cfg.Name).Msg("another agent on this host uses these cards too: give each agent its card with --gpu UUID")
		}
	} else if free, err := id.holdName(cfg.LockDir, a.cfg.Name); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	} else if !free {
		cfg.Log.Warn().Str("agent", a.cfg.Name).Msg("another agent on this host runs under this name: the server sees them as one runner; give each its own --name or none")
	}
	a.id = id
	cacheDir := sourceCacheDir(cfg, a.cfg.Name)
	cache, err := source.NewCache(cacheDir, cfg.CacheBytes, cfg.SourceLimits, cfg.Log)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	cache.OnEvict = a.evicted
	a.cache = cache
	if a.cfg.BuilderDir == "" {
		a.cfg.BuilderDir = filepath.Join(filepath.Dir(cacheDir), "builder")
		if cfg.StateDir != "" {
			a.cfg.BuilderDir = filepath.Join(cfg.StateDir, "builder")
		}
	}
	if saved != nil {
		// The saved identity holds while it describes this host; new
		// labels or cards (a driver upgrade, another card) register again,
		// under the same name and so the same row.
		if saved.sameRegistration(cfg.Labels, a.cards) || cfg.RegistrationToken == "" {
			a.cfg.Token = saved.Token
			cfg.Log.Info().Int64("agent_id", saved.AgentID).Str("agent", saved.Name).Str("state", cfg.StateDir).Msg("reusing the saved agent identity")
			if !saved.sameRegistration(cfg.Labels, a.cards) {
				cfg.Log.Warn().Msg("the runner's labels or cards changed since it registered, but there is no registration token to register again: the server matches jobs to the old ones")
			}
		} else {
			cfg.Log.Info().Strs("labels", cfg.Labels).Int("cards", len(a.cards)).Msg("the runner's labels or cards changed since it registered: registering again")
		}
	}
	var previous, pending string // the name's token, which a registration again must present; one whose answer was lost
	if saved != nil {
		a.state = *saved
		previous, pending = saved.Token, saved.PendingToken
	}
	c, err := agentapi.NewClient(agentapi.ClientConfig{
		Server: cfg.Server, Token: a.cfg.Token, RegistrationToken: cfg.RegistrationToken, PreviousToken: previous,
		Name: a.cfg.Name, Labels: cfg.Labels, GPUUUIDs: a.gpus, Cards: a.cards, Backoff: cfg.Backoff, Timeout: cfg.CallTimeout, Log: cfg.Log,
		OnRegister: a.saveIdentity, PendingToken: pending, OnPropose: a.savePending,
	})
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	a.client = c
	return a, nil
}

// fillDefaults sets the timings, the docker command and the engine's
// output budget left unset.
func (cfg *Config) fillDefaults() {
	if cfg.ClaimWait <= 0 {
		cfg.ClaimWait = DefaultClaimWait
	}
	if cfg.LogFlush <= 0 {
		cfg.LogFlush = time.Second
	}
	if cfg.CancelPoll <= 0 {
		cfg.CancelPoll = DefaultCancelPoll
	}
	if cfg.Docker == "" {
		cfg.Docker = "docker"
	}
	if cfg.EngineOutput <= 0 {
		cfg.EngineOutput = engine.DefaultOutputLimit
	}
}

// savedIdentity reads the identity saved in the state directory, if it
// is for this server and no token was given; its name is the agent's when
// none was given.
func (cfg *Config) savedIdentity() (*state, error) {
	if cfg.StateDir == "" {
		return nil, nil
	}
	st, ok, err := loadState(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	switch {
	case !ok:
	case st.Server != strings.TrimRight(cfg.Server, "/"):
		cfg.Log.Warn().Str("saved_for", st.Server).Msg("the saved agent identity is for another server: registering with this one")
	case cfg.Token == "":
		if cfg.Name == "" {
			cfg.Name = st.Name
		}
		return &st, nil
	}
	return nil, nil
}

// listGPUs finds the cards the agent serves: the ones --gpu names, or
// all; a named card that is not on this host is an error.
func (a *Agent) listGPUs() error {
	cfg := a.cfg
	if cfg.GPU == nil {
		return nil
	}
	infos, err := cfg.GPU.List()
	if err != nil {
		cfg.Log.Warn().Err(err).Msg("list GPUs: the agent claims only jobs without a GPU pin")
	}
	for _, i := range infos {
		if len(cfg.GPUs) == 0 || contains(cfg.GPUs, i.UUID) {
			a.gpus = append(a.gpus, i.UUID)
			a.cards = append(a.cards, fleet.Card{UUID: i.UUID, Model: i.Name, MemoryMiB: i.MemoryMiB, Driver: i.Driver})
		}
	}
	for _, want := range cfg.GPUs {
		if !contains(a.gpus, want) {
			return fmt.Errorf("GPU %s is not on this host (nvidia-smi -L lists its cards)", want)
		}
	}
	return nil
}

// sourceCacheDir is where checkouts are cached: --cache-dir, else under
// the state or work directory, else the user's cache directory.
func sourceCacheDir(cfg Config, name string) string {
	switch {
	case cfg.CacheDir != "":
		return cfg.CacheDir
	case cfg.StateDir != "":
		return filepath.Join(cfg.StateDir, "sources")
	case cfg.WorkDir != "":
		return filepath.Join(cfg.WorkDir, "sources")
	}
	d, err := os.UserCacheDir()
	if err != nil {
		d = os.TempDir()
	}
	return filepath.Join(d, "perfgate", name, "sources")
}

// saveIdentity keeps a new registration in the state directory; it
// replaces any pending one.
func (a *Agent) saveIdentity(r agentapi.RegisterResponse) error {
	if a.cfg.StateDir == "" {
		return nil
	}
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	st := state{Server: strings.TrimRight(a.cfg.Server, "/"), AgentID: cmp.Or(r.AgentID, a.state.AgentID), Name: a.cfg.Name,
		Token: r.Token, RegisteredAt: time.Now().UTC(), Labels: a.cfg.Labels, Cards: a.cards}
	if err := saveState(a.cfg.StateDir, st); err != nil {
		return err
	}
	a.state = st
	a.cfg.Log.Info().Str("state", filepath.Join(a.cfg.StateDir, stateFile)).Msg("saved the agent identity: a restart reuses it")
	return nil
}

// savePending keeps the token a registration is about to propose beside
// the identity in use, before it is sent: if the runner stops before the
// answer, the next start tries it (the server may hold it) and proposes it
// again.
func (a *Agent) savePending(token string) error {
	if a.cfg.StateDir == "" {
		return nil
	}
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	st := a.state
	st.Server, st.Name, st.PendingToken = strings.TrimRight(a.cfg.Server, "/"), a.cfg.Name, token
	if err := saveState(a.cfg.StateDir, st); err != nil {
		return err
	}
	a.state = st
	return nil
}

// Run claims and runs jobs until ctx ends. A job running when ctx ends is
// abandoned with its engine stopped; its lease lapses and the server
// queues it again.
func (a *Agent) Run(ctx context.Context) error {
	defer a.id.release()
	defer a.closeBuilder()
	log := a.cfg.Log
	log.Info().Str("server", a.cfg.Server).Str("agent", a.cfg.Name).Strs("labels", a.cfg.Labels).
		Strs("gpus", a.gpus).Str("source_cache", a.cache.Dir()).Bool("allow_uncontained", a.cfg.AllowUncontained).Msg("agent started")
	p := a.cfg.Sandbox
	log.Info().Int("nofile", p.NoFile).Int("nproc", p.NProc).Int("pids_limit", p.PidsLimit).Str("cpus", p.CPUs).
		Str("memory", p.Memory).Str("shm_size", p.ShmSize).Str("scratch", p.Scratch).
		Str("log_max_size", p.LogMaxSize).Int("log_max_files", p.LogMaxFiles).Int64("engine_output_per_job", a.cfg.EngineOutput).
		Str("host_limits_from", sandbox.CurrentHost().From).Msg("engine limits")
	a.removeLeftovers(ctx)
	if a.client.Token() == "" {
		if _, err := a.client.Register(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("agent: %w", err)
		}
	}
	for ctx.Err() == nil {
		job, err := a.client.Claim(ctx, a.cfg.ClaimWait)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			var se *agentapi.StatusError
			if errors.As(err, &se) && (se.Status == 401 || se.Status == 403) {
				return fmt.Errorf("agent: %w", err)
			}
			log.Error().Err(err).Msg("claim failed")
			sleep(ctx, time.Second)
			continue
		}
		if job == nil {
			continue
		}
		a.runJob(ctx, job)
	}
	log.Info().Msg("agent stopped")
	return nil
}

// removeLeftovers removes engine containers and sandbox networks an
// earlier run of this agent left, when Docker is here at all.
func (a *Agent) removeLeftovers(ctx context.Context) {
	if _, err := exec.LookPath(a.cfg.Docker); err != nil {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := engine.RemoveLeftovers(lctx, a.cfg.Docker, a.cfg.Name, a.cfg.Log); err != nil {
		a.cfg.Log.Warn().Err(err).Msg("could not remove engine containers left by an earlier run (is the Docker daemon up?)")
	}
}

// relayImage builds the sandbox relay's image on the first image engine
// (and again after a failure: the daemon may have been down).
func (a *Agent) relayImage(ctx context.Context) (string, error) {
	a.relayMu.Lock()
	defer a.relayMu.Unlock()
	if a.relay != "" {
		return a.relay, nil
	}
	bin := a.cfg.RelayBin
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("sandbox relay: %w", err)
		}
		bin = exe
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	id, err := sandbox.EnsureRelayImage(rctx, a.cfg.Docker, bin)
	if err != nil {
		return "", fmt.Errorf("sandbox relay: %w", err)
	}
	a.relay = id
	a.cfg.Log.Info().Str("image", id).Msg("sandbox relay image ready")
	return id, nil
}

// evicted removes the image a build left for an evicted commit.
func (a *Agent) evicted(sha, home string) {
	for _, id := range builtImages(home) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := exec.CommandContext(ctx, a.cfg.Docker, "image", "rm", id).CombinedOutput()
		cancel()
		if err != nil {
			a.cfg.Log.Warn().Err(err).Str("sha", sha).Str("image", id).Str("output", strings.TrimSpace(string(out))).Msg("remove the build of an evicted commit")
		}
	}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func shortGPU(uuid string) string {
	s := strings.TrimPrefix(strings.TrimPrefix(uuid, "GPU-"), "MIG-")
	if len(s) > 8 {
		s = s[:8]
	}
	return s
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
