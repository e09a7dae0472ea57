// Package agentapi is the HTTP+JSON protocol between the perfgate server
// and its runner agents, under /api/v1/: the wire types and the job Plan
// (this file), the server side (server.go) and a retrying Go client
// (client.go).
//
// The protocol follows the CI runners' (GitHub Actions, GitLab, Buildkite):
// a shared registration token is exchanged once for a per-agent token the
// server stores hashed; work is claimed by long poll; every call about a job
// carries its lease id, a fencing token, so a call from a lease that is no
// longer current is refused with 409 and the agent abandons the job; log
// chunks carry offsets (416 answers the accepted length so the agent
// rewinds) and result uploads an idempotency key (a retry stores once).
package agentapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/perfgate/perfgate/internal/config"
	"github.com/perfgate/perfgate/internal/result"
)

// PlanVersion is the version of the Plan format this code writes. An agent
// refuses a plan newer than it knows.
const PlanVersion = 1

// DefaultMaxErrorRate is the fraction of failed requests above which a
// measured run fails the job: a server answering 5xx measures nothing.
const DefaultMaxErrorRate = 0.05

// Plan is everything an agent needs to run one job. The server builds it
// from the base branch's configuration at enqueue time and stores it as the
// job's config snapshot, so what runs on a GPU host never comes from the
// pull request and a re-queued job runs exactly what it was queued with.
type Plan struct {
	Version  int      `json:"version"`
	Repo     string   `json:"repo,omitempty"`
	HeadSHA  string   `json:"head_sha,omitempty"`
	Tier     string   `json:"tier"`
	Engine   Engine   `json:"engine"`
	Workload Workload `json:"workload"`
	// Warmup requests are sent once after the engine is ready and discarded.
	Warmup int `json:"warmup"`
	// Repeats is the number of measured runs, each uploaded as it ends.
	Repeats int `json:"repeats"`
	// GPUUUID pins the job to one card; "" lets the agent use its first.
	GPUUUID string `json:"gpu_uuid,omitempty"`
	// MaxErrorRate fails the job when a run's failed-request fraction is
	// above it; 0 means DefaultMaxErrorRate.
	MaxErrorRate float64 `json:"max_error_rate,omitempty"`
}

// Engine is how to start the inference server: exactly one of Image,
// Command or Sim.
type Engine struct {
	// Image is name@sha256:<digest>, run with docker on the job's GPU.
	Image string `json:"image,omitempty"`
	// Command is an argv template ({{.Port}}, {{.Model}}, {{.GPU}},
	// {{.JobID}}), run without a shell.
	Command []string `json:"command,omitempty"`
	// Sim runs perfgate's built-in simulated engine inside the agent: a
	// development engine for the demo and tests, never a measurement.
	Sim           *SimEngine        `json:"sim,omitempty"`
	Model         string            `json:"model"`
	Args          []string          `json:"args,omitempty"`
	ReadinessPath string            `json:"readiness_path,omitempty"`
	StartTimeout  Duration          `json:"start_timeout,omitempty"`
	Port          int               `json:"port,omitempty"` // 0 picks a free one
	Env           map[string]string `json:"env,omitempty"`
}

// SimEngine shapes the built-in simulated engine (see package sim); zero
// fields keep sim.DefaultConfig's values.
type SimEngine struct {
	Slowdown     float64  `json:"slowdown,omitempty"`
	ErrorRate    float64  `json:"error_rate,omitempty"`
	StallMS      int      `json:"stall_ms,omitempty"`
	StartupDelay Duration `json:"startup_delay,omitempty"`
	DecodeStep   Duration `json:"decode_step,omitempty"`
	Seed         int64    `json:"seed,omitempty"`
}

// Workload is the bench options of every run, less the target.
type Workload struct {
	Endpoint       string      `json:"endpoint,omitempty"`
	Dataset        string      `json:"dataset,omitempty"`
	DatasetPath    string      `json:"dataset_path,omitempty"`
	InputLen       int         `json:"input_len,omitempty"`
	OutputLen      int         `json:"output_len,omitempty"`
	NumPrompts     int         `json:"num_prompts"`
	RequestRate    result.Rate `json:"request_rate"`
	Burstiness     float64     `json:"burstiness,omitempty"`
	MaxConcurrency int         `json:"max_concurrency,omitempty"`
	Seed           int64       `json:"seed,omitempty"`
	Temperature    float64     `json:"temperature,omitempty"`
	Timeout        Duration    `json:"timeout,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("2m30s").
type Duration time.Duration

// D is the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes "1m30s".
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads "1m30s" or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if err2 := json.Unmarshal(b, &n); err2 != nil {
			return fmt.Errorf("duration: want a string such as \"90s\": %w", err)
		}
		*d = Duration(n)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

// PlanFromConfig builds the plan of one tier of a repository's config.
// Repo and HeadSHA are left for the caller to set.
func PlanFromConfig(cfg *config.Config, tier string) (Plan, error) {
	if cfg == nil {
		return Plan{}, errors.New("plan: no config")
	}
	t, err := cfg.Tier(tier)
	if err != nil {
		return Plan{}, fmt.Errorf("plan: %w", err)
	}
	s, w := cfg.Server, cfg.Workload
	p := Plan{
		Version: PlanVersion,
		Tier:    t.Name,
		Engine: Engine{
			Image:         s.Image,
			Command:       append([]string(nil), s.Command...),
			Model:         s.Model,
			Args:          append([]string(nil), s.Args...),
			ReadinessPath: s.ReadinessURL,
			StartTimeout:  Duration(s.StartTimeout.D()),
			Port:          s.Port,
		},
		Workload: Workload{
			Endpoint:       w.Endpoint,
			Dataset:        w.Dataset,
			DatasetPath:    w.DatasetPath,
			InputLen:       w.InputLen,
			OutputLen:      w.OutputLen,
			NumPrompts:     t.Prompts,
			RequestRate:    w.RequestRate,
			MaxConcurrency: w.MaxConcurrency,
		},
		Warmup:  t.Warmup,
		Repeats: t.Repeats,
		GPUUUID: cfg.Runner.GPUUUID,
	}
	if err := p.Validate(); err != nil {
		return Plan{}, err
	}
	return p, nil
}

// Validate reports every problem of a plan at once.
func (p Plan) Validate() error {
	var errs []error
	if p.Version > PlanVersion {
		errs = append(errs, fmt.Errorf("plan version %d is newer than this agent knows (%d): upgrade perfgate on the runner", p.Version, PlanVersion))
	}
	n := 0
	if p.Engine.Image != "" {
		n++
	}
	if len(p.Engine.Command) > 0 {
		n++
	}
	if p.Engine.Sim != nil {
		n++
	}
	if n != 1 {
		errs = append(errs, errors.New("plan engine: set exactly one of image, command or sim"))
	}
	if p.Repeats < 1 {
		errs = append(errs, fmt.Errorf("plan repeats is %d: must be >= 1", p.Repeats))
	}
	if p.Warmup < 0 {
		errs = append(errs, fmt.Errorf("plan warmup is %d: must be >= 0", p.Warmup))
	}
	if p.Workload.NumPrompts < 1 {
		errs = append(errs, fmt.Errorf("plan num_prompts is %d: must be >= 1", p.Workload.NumPrompts))
	}
	if p.MaxErrorRate < 0 || p.MaxErrorRate > 1 {
		errs = append(errs, fmt.Errorf("plan max_error_rate is %g: must be in [0, 1]", p.MaxErrorRate))
	}
	return errors.Join(errs...)
}

// ParsePlan decodes and validates a job's config snapshot.
func ParsePlan(data []byte) (Plan, error) {
	var p Plan
	if err := json.Unmarshal(data, &p); err != nil {
		return Plan{}, fmt.Errorf("decode plan: %w", err)
	}
	if err := p.Validate(); err != nil {
		return Plan{}, fmt.Errorf("invalid plan: %w", err)
	}
	return p, nil
}

// ErrorBody is every error answer: what went wrong and what to do.
type ErrorBody struct {
	Error string `json:"error"`
	// Length is the accepted log length, on 416 only.
	Length *int64 `json:"length,omitempty"`
}

// RegisterRequest is POST /api/v1/agents/register (Bearer: the
// registration token).
type RegisterRequest struct {
	Name     string   `json:"name"`
	Labels   []string `json:"labels"`
	GPUUUIDs []string `json:"gpu_uuids"`
}

// RegisterResponse carries the agent's own token: shown once, stored only
// hashed on the server.
type RegisterResponse struct {
	AgentID int64  `json:"agent_id"`
	Token   string `json:"token"`
}

// ClaimResponse is a claimed job (200); 204 means nothing to do yet.
type ClaimResponse struct {
	JobID          int64           `json:"job_id"`
	LeaseID        string          `json:"lease_id"`
	LeaseExpiresAt time.Time       `json:"lease_expires_at"`
	LeaseSeconds   float64         `json:"lease_seconds"`
	Attempt        int             `json:"attempt"`
	Tier           string          `json:"tier"`
	Repo           string          `json:"repo,omitempty"`
	HeadSHA        string          `json:"head_sha,omitempty"`
	GPUUUID        string          `json:"gpu_uuid,omitempty"`
	Plan           json.RawMessage `json:"plan"`
}

// HeartbeatRequest renews a lease.
type HeartbeatRequest struct {
	LeaseID string `json:"lease_id"`
}

// HeartbeatResponse says whether to stop (the job was superseded or
// cancelled) and until when the lease now runs.
type HeartbeatResponse struct {
	Cancel         bool      `json:"cancel"`
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
}

// LogResponse is the job log's stored length after an append.
type LogResponse struct {
	Length int64 `json:"length"`
}

// ResultRequest uploads one run's result.
type ResultRequest struct {
	LeaseID        string          `json:"lease_id"`
	IdempotencyKey string          `json:"idempotency_key"`
	RunIndex       int             `json:"run_index"`
	Kind           string          `json:"kind"` // "measured" or "warmup"
	Result         json.RawMessage `json:"result"`
}

// ResultResponse is the stored result's identity; Created is false for a
// retry that was already stored.
type ResultResponse struct {
	ResultID int64 `json:"result_id"`
	Attempt  int   `json:"attempt"`
	Created  bool  `json:"created"`
}

// FinishRequest ends a job. Status is "succeeded", "failed" or
// "cancelled"; Reason says why it failed.
type FinishRequest struct {
	LeaseID string `json:"lease_id"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
}

// FinishResponse is the job as finished.
type FinishResponse struct {
	JobID  int64  `json:"job_id"`
	Status string `json:"status"`
	// Repeated is true when the job was already finished so by this lease
	// (a retried finish).
	Repeated bool `json:"repeated"`
}
