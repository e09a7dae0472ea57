package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/runner/engine"
	"github.com/perfgate/perfgate/internal/runner/gpu"
	"github.com/perfgate/perfgate/internal/runner/sandbox"
	"github.com/perfgate/perfgate/internal/runner/sim"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
)

// running is a started engine: a process or container (engine.Server) or
// the in-process sim.
type running struct {
	describe string // image, command or "perfgate-sim", for the environment
	proc     *engine.Server
	sim      *simServer
}

func (r *running) BaseURL() string {
	if r.proc != nil {
		return r.proc.BaseURL()
	}
	return r.sim.base
}

// cpuTime is the CPU time the engine's processes have used so far; false
// for the in-process sim (its CPU is the agent's) or where the process
// table cannot be read.
func (r *running) cpuTime() (time.Duration, bool) {
	if r.proc == nil {
		return 0, false
	}
	return r.proc.CPUTime()
}

func (r *running) Exited() <-chan struct{} {
	if r.proc != nil {
		return r.proc.Exited()
	}
	return r.sim.done
}

func (r *running) CrashError() error {
	if r.proc != nil {
		return r.proc.CrashError()
	}
	if r.sim.err == nil {
		return errors.New("simulated engine stopped")
	}
	return fmt.Errorf("simulated engine stopped: %w", r.sim.err)
}

func (r *running) Stop(ctx context.Context) error {
	if r.proc != nil {
		return r.proc.Stop(ctx)
	}
	r.sim.stop()
	return nil
}

// allow says which GPU processes are the engine's own.
func (r *running) allow() func(uint32) bool {
	if r.proc != nil && r.proc.PID() > 0 {
		return gpu.AllowDescendants(r.proc.PID())
	}
	return nil
}

// startEngine starts a side's engine and waits until it is ready. The
// engine's output goes to the job log.
func (a *Agent) startEngine(ctx context.Context, c *agentapi.ClaimResponse, p agentapi.Plan, s *side, uuid string, log zerolog.Logger) (*running, error) {
	e := p.Engine
	if e.Sim != nil {
		return startSim(ctx, e, s.profileDir, log)
	}
	a.starts++
	jobID := fmt.Sprintf("job-%d-%d", c.JobID, c.Attempt)
	if s.name != "" {
		jobID += "-" + s.name
	}
	spec := engine.Spec{
		Image: e.Image, Command: e.Command, Model: e.Model, Args: e.Args, Port: e.Port, ContainerPort: e.ContainerPort,
		GPUUUID: uuid, ReadinessPath: e.ReadinessPath, StartTimeout: e.StartTimeout.D(),
		JobID: fmt.Sprintf("%s-%d", jobID, a.starts), Agent: a.cfg.Name, Env: e.Env, AllowEnv: a.cfg.EngineEnv,
		Workdir: s.workdir(), SHA: s.sha, ModelsDir: a.cfg.ModelsDir, ProfileDir: s.profileDir, Sandbox: a.cfg.Sandbox,
		DockerBinary: a.cfg.Docker, NoGPU: a.cfg.NoGPUDevices,
		Output: engineLogWriter{log}, OutputBudget: a.jobOutput,
	}
	if s.built != "" {
		spec.Image = s.built // the build of this commit, on the pinned base
	}
	if spec.Image != "" && sandbox.InContainer() {
		// The daemon mounts the checkout from the host's file system.
		if err := sandbox.CheckHostPaths(ctx, a.cfg.Docker, sandbox.SelfContainer(), spec.Workdir, spec.ModelsDir); err != nil {
			return nil, err
		}
	}
	if spec.Image != "" {
		relay, err := a.relayImage(ctx)
		if err != nil {
			return nil, err
		}
		spec.RelayImage = relay
	}
	srv, err := engine.Start(ctx, spec, log)
	if err != nil {
		return nil, err
	}
	desc := e.Image
	if desc == "" {
		// The config's template, not the command as it ran: the gate
		// compares this field between base and head, and the filled-in
		// command differs in every run (the checkout's path, the port).
		desc = strings.Join(e.Command, " ")
	}
	return &running{describe: desc, proc: srv}, nil
}

// engineLogWriter copies the engine's output into the job log, one log
// line per write.
type engineLogWriter struct{ log zerolog.Logger }

func (w engineLogWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if line != "" {
			w.log.Info().Str("source", "engine").Msg(line)
		}
	}
	return len(p), nil
}

// simServer is the built-in simulated engine served on a loopback port.
type simServer struct {
	base   string
	cancel context.CancelFunc
	done   chan struct{}
	err    error // set before done closes
}

func (s *simServer) stop() {
	s.cancel()
	<-s.done
}

// startSim serves the sim and waits for /health like a real engine's
// readiness check.
func startSim(ctx context.Context, e agentapi.Engine, profileDir string, log zerolog.Logger) (*running, error) {
	cfg := sim.DefaultConfig()
	if e.Model != "" {
		cfg.Model = e.Model
	}
	o := e.Sim
	if o.Slowdown > 0 {
		cfg.Slowdown = o.Slowdown
	}
	cfg.ErrorRate = o.ErrorRate
	cfg.StallMS = o.StallMS
	cfg.StartupDelay = o.StartupDelay.D()
	if o.DecodeStep > 0 {
		cfg.DecodeStep = o.DecodeStep.D()
	}
	if o.Seed != 0 {
		cfg.Seed = o.Seed
	}
	cfg.ProfileDir = profileDir // set for a profiling pass
	timeout := e.StartTimeout.D()
	if timeout <= 0 {
		timeout = engine.DefaultStartTimeout
	}

	// The sim lives as long as the job, not as long as the start call.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &simServer{cancel: cancel, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		defer close(s.done)
		s.err = sim.Serve(sctx, cfg, "127.0.0.1:0", func(a string) { addr <- a })
	}()
	select {
	case a := <-addr:
		s.base = "http://" + a
	case <-s.done:
		cancel()
		return nil, fmt.Errorf("start simulated engine: %w", s.err)
	}
	log.Info().Str("engine", "perfgate-sim").Str("url", s.base).Msg("engine starting")
	start := time.Now()
	if err := waitHealthy(ctx, s.base+"/health", timeout); err != nil {
		s.stop()
		return nil, fmt.Errorf("engine not ready after %s: %w", timeout, err)
	}
	log.Info().Dur("startup", time.Since(start)).Msg("engine ready")
	return &running{describe: "perfgate-sim", sim: s}, nil
}

func waitHealthy(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := errors.New("no answer yet")
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Errorf("GET %s answered %d", url, resp.StatusCode)
		} else if ctx.Err() == nil {
			last = err
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return last
		case <-t.C:
		}
	}
}
