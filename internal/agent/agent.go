// Package agent is the runner on a GPU host (`perfgate agent`): it claims
// jobs from the perfgate server, starts the inference engine the job's plan
// names on one card, warms it up, runs the measured repeats with GPU
// telemetry, uploads each result as it ends and streams the job's log, then
// stops the engine and finishes the job.
//
// Nothing a pull request supplies runs here: the plan is the server's
// snapshot of the base branch's configuration.
package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/agentapi"
	"github.com/perfgate/perfgate/internal/gpu"
)

// DefaultClaimWait is how long one claim long-polls.
const DefaultClaimWait = 30 * time.Second

// Config configures an agent.
type Config struct {
	Server string // the perfgate server's base URL
	// Token is the agent's own token; with RegistrationToken instead the
	// agent registers on start (and again if the server forgets it).
	Token             string
	RegistrationToken string
	Name              string
	Labels            []string
	// GPU opens the host's cards; nil opens NVML, and a host without it
	// runs jobs with telemetry marked unavailable.
	GPU gpu.Provider
	// Sim, when set, replaces every plan's engine with the built-in
	// simulated engine: for development without a GPU, never a measurement.
	Sim *agentapi.SimEngine
	// WorkDir holds job files; a plan's relative dataset path is read from
	// it. The current directory when empty.
	WorkDir string
	Log     zerolog.Logger
	// LogOutput, when set, also gets every job log line (JSON), so the
	// agent's own output shows what the server's job log shows.
	LogOutput io.Writer

	ClaimWait      time.Duration    // DefaultClaimWait when 0
	Backoff        agentapi.Backoff // the API client's retry shape
	SampleInterval time.Duration    // gpu.DefaultInterval when 0
	// LogFlush is how often the job log is sent; 1 s when 0.
	LogFlush time.Duration
}

// Agent runs jobs one at a time.
type Agent struct {
	cfg    Config
	client *agentapi.Client
	gpus   []string
	host   string
}

// New checks the configuration and opens the GPUs; Run starts work.
func New(cfg Config) (*Agent, error) {
	if cfg.Name == "" {
		h, _ := os.Hostname()
		cfg.Name = h
	}
	if cfg.ClaimWait <= 0 {
		cfg.ClaimWait = DefaultClaimWait
	}
	if cfg.LogFlush <= 0 {
		cfg.LogFlush = time.Second
	}
	if cfg.GPU == nil {
		p, err := gpu.OpenNVML(cfg.Log)
		if err != nil {
			cfg.Log.Warn().Err(err).Msg("no NVML: jobs run with GPU telemetry marked unavailable and the card unchecked")
		} else {
			cfg.GPU = p
		}
	}
	a := &Agent{cfg: cfg}
	a.host, _ = os.Hostname()
	if cfg.GPU != nil {
		infos, err := cfg.GPU.List()
		if err != nil {
			cfg.Log.Warn().Err(err).Msg("list GPUs: the agent claims only jobs without a GPU pin")
		}
		for _, i := range infos {
			a.gpus = append(a.gpus, i.UUID)
		}
	}
	c, err := agentapi.NewClient(agentapi.ClientConfig{
		Server: cfg.Server, Token: cfg.Token, RegistrationToken: cfg.RegistrationToken,
		Name: cfg.Name, Labels: cfg.Labels, GPUUUIDs: a.gpus, Backoff: cfg.Backoff, Log: cfg.Log,
	})
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	a.client = c
	return a, nil
}

// Run claims and runs jobs until ctx ends. A job running when ctx ends is
// abandoned with its engine stopped; its lease lapses and the server
// queues it again.
func (a *Agent) Run(ctx context.Context) error {
	log := a.cfg.Log
	log.Info().Str("server", a.cfg.Server).Str("agent", a.cfg.Name).Strs("labels", a.cfg.Labels).
		Strs("gpus", a.gpus).Msg("agent started")
	if a.cfg.Token == "" {
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

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
