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
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/fleet"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// Protocol defaults: a server answers with these when set to zero, and a
// runner assumes them when a claim says nothing.
const (
	DefaultLease    = 2 * time.Minute
	DefaultLongPoll = 30 * time.Second
)

// AgentTokenPrefix starts every agent token the server issues, so a token
// file can say which token it holds.
const AgentTokenPrefix = "pga_"

// NewToken makes an agent token: AgentTokenPrefix and 32 random bytes in
// hex.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := crand.Read(b); err != nil {
		return "", fmt.Errorf("new agent token: %w", err)
	}
	return AgentTokenPrefix + hex.EncodeToString(b), nil
}

// WellFormedToken reports whether tok has NewToken's form, the only form
// the server accepts as a proposed token (no guessable ones).
func WellFormedToken(tok string) bool {
	h, ok := strings.CutPrefix(tok, AgentTokenPrefix)
	if !ok || len(h) != 64 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil && strings.ToLower(h) == h
}

// PlanVersion is the version of the Plan format this code writes. An agent
// refuses a plan newer than it knows. Version 2 added the commits a job
// measures from their own checkout (an agent of version 1 would run the
// same engine for every commit), interleaving and the build step.
const PlanVersion = 2

// Sides of an interleaved job: which commit a measured run measured.
const (
	SideBase = "base"
	SideHead = "head"
)

// DefaultPairs is the number of base/head pairs an interleaved job runs
// when its plan leaves Pairs at 0 (the merge tier's default).
const DefaultPairs = 8

// MaxPairs bounds an interleaved job: each pair is two measured runs.
const MaxPairs = 64

// OrderABBA is the balanced interleave order: pairs alternate base-head
// and head-base (B H H B B H H B …), so a drift in time adds equally to
// both sides over each block of two pairs.
const OrderABBA = "abba"

// DefaultMaxErrorRate is the fraction of failed requests above which a
// measured run fails the job: a server answering 5xx measures nothing.
const DefaultMaxErrorRate = 0.05

// Plan is everything an agent needs to run one job. The server builds it
// from the base branch's configuration at enqueue time and stores it as the
// job's config snapshot, so what runs on a GPU host never comes from the
// pull request and a re-queued job runs exactly what it was queued with.
type Plan struct {
	Version int    `json:"version"`
	Repo    string `json:"repo,omitempty"`
	// HeadSHA is the commit the job measures: a PR's head, its base, a
	// merge group's head, a bisect midpoint. The agent fetches that tree
	// through the server and starts the engine from it.
	HeadSHA string `json:"head_sha,omitempty"`
	// BaseSHA is the commit an interleaved job measures alongside HeadSHA.
	BaseSHA string `json:"base_sha,omitempty"`
	// Interleave, when set, measures BaseSHA and HeadSHA in one job on one
	// card, alternating in a balanced order; Repeats is then unused.
	Interleave *Interleave `json:"interleave,omitempty"`
	Tier       string      `json:"tier"`
	Engine     Engine      `json:"engine"`
	Workload   Workload    `json:"workload"`
	// Warmup requests are sent once after the engine is ready and discarded.
	Warmup int `json:"warmup"`
	// Repeats is the number of measured runs, each uploaded as it ends.
	Repeats int `json:"repeats"`
	// GPUUUID pins the job to one card; "" lets the agent use its first.
	GPUUUID string `json:"gpu_uuid,omitempty"`
	// MaxErrorRate fails the job when a run's failed-request fraction is
	// above it; 0 means DefaultMaxErrorRate.
	MaxErrorRate float64 `json:"max_error_rate,omitempty"`
	// Profile, when set, makes the job a profiling pass of BaseSHA and
	// HeadSHA (artifacts.go) rather than measured runs.
	Profile *ProfilePlan `json:"profile,omitempty"`
	// Capacity and Soak make the job a capacity sweep or a soak
	// (longrun.go).
	Capacity *CapacityPlan `json:"capacity,omitempty"`
	Soak     *SoakPlan     `json:"soak,omitempty"`
}

// Interleave shapes an interleaved base/head job.
type Interleave struct {
	// Pairs is the number of base/head pairs; DefaultPairs when 0.
	Pairs int `json:"pairs,omitempty"`
	// Order is OrderABBA (the default, and the only order so far).
	Order string `json:"order,omitempty"`
}

// Slot is one measured run of a plan: its position, and for an
// interleaved plan the side and pair it belongs to.
type Slot struct {
	RunIndex int
	Side     string // SideBase, SideHead, or "" in a plan of one commit
	Pair     int
}

// Runs is the number of measured runs the plan asks for.
func (p Plan) Runs() int {
	if p.Interleave != nil {
		return 2 * p.Interleave.pairs()
	}
	return p.Repeats
}

// Schedule is the order of the plan's measured runs. An interleaved plan
// alternates base-head and head-base pairs (ABBA blocks).
func (p Plan) Schedule() []Slot {
	if p.Interleave == nil {
		out := make([]Slot, p.Repeats)
		for i := range out {
			out[i] = Slot{RunIndex: i}
		}
		return out
	}
	n := p.Interleave.pairs()
	out := make([]Slot, 0, 2*n)
	for pair := range n {
		first, second := SideBase, SideHead
		if pair%2 == 1 {
			first, second = SideHead, SideBase
		}
		out = append(out, Slot{RunIndex: len(out), Side: first, Pair: pair}, Slot{RunIndex: len(out) + 1, Side: second, Pair: pair})
	}
	return out
}

// Commit is the commit a side measures: HeadSHA for "head" and for a plan
// of one commit, BaseSHA for "base".
func (p Plan) Commit(side string) string {
	if side == SideBase {
		return p.BaseSHA
	}
	return p.HeadSHA
}

// Commits lists the distinct commits the plan measures.
func (p Plan) Commits() []string {
	var out []string
	if p.HeadSHA != "" {
		out = append(out, p.HeadSHA)
	}
	if (p.Interleave != nil || p.Capacity != nil) && p.BaseSHA != "" && p.BaseSHA != p.HeadSHA {
		out = append(out, p.BaseSHA) // a capacity job sweeps base too (longrun.go)
	}
	if d := p.Workload.DatasetSHA; d != "" && d != p.HeadSHA && (p.Interleave == nil || d != p.BaseSHA) {
		out = append(out, d)
	}
	return out
}

func (i *Interleave) pairs() int {
	if i.Pairs <= 0 {
		return DefaultPairs
	}
	return i.Pairs
}

// Engine is how to start the inference server: exactly one of Image,
// Command or Sim.
type Engine struct {
	// Image is name@sha256:<digest>, the pinned base image, run with docker
	// in the runner's sandbox on the job's GPU, with the checkout mounted
	// read-only at /workspace.
	Image string `json:"image,omitempty"`
	// Command is an argv template ({{.Port}}, {{.Model}}, {{.GPU}},
	// {{.JobID}}, {{.Workdir}}, {{.SHA}}, {{.Models}}), run without a
	// shell and outside any container: an agent runs it on a commit's code
	// only when its own configuration allows uncontained engines.
	Command []string `json:"command,omitempty"`
	// Build, when set, runs in the checkout before the engine starts; its
	// result is cached per commit.
	Build *Build `json:"build,omitempty"`
	// ContainerPort is the port an image engine listens on inside its
	// container; 8000 (vLLM's) when 0.
	ContainerPort int `json:"container_port,omitempty"`
	// Sim runs perfgate's built-in simulated engine inside the agent: a
	// development engine for the demo and tests, never a measurement.
	Sim           *SimEngine `json:"sim,omitempty"`
	Model         string     `json:"model"`
	Args          []string   `json:"args,omitempty"`
	ReadinessPath string     `json:"readiness_path,omitempty"`
	StartTimeout  Duration   `json:"start_timeout,omitempty"`
	// Port is the host port; 0, the default, lets the agent pick a free
	// one, so agents sharing a host never collide.
	Port int `json:"port,omitempty"`
	// Env is added to the engine's environment (never a PERFGATE_* name).
	Env map[string]string `json:"env,omitempty"`
}

// Build is the optional build step of an engine: an argv template (the
// engine's placeholders plus {{.Image}}, the pinned base image) run in the
// checkout, e.g. docker build --build-arg BASE={{.Image}} -t
// perfgate-engine:{{.SHA}} . — and the image it leaves, which the engine
// then runs instead of Image.
type Build struct {
	Command []string `json:"command"`
	// Image is the template of the image the build leaves; empty for a
	// build that makes files in the checkout (for a command engine).
	Image   string   `json:"image,omitempty"`
	Timeout Duration `json:"timeout,omitempty"` // DefaultBuildTimeout when 0
}

// DefaultBuildTimeout bounds a build step whose plan sets no timeout.
const DefaultBuildTimeout = 30 * time.Minute

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
	Endpoint    string `json:"endpoint,omitempty"`
	Dataset     string `json:"dataset,omitempty"`
	DatasetPath string `json:"dataset_path,omitempty"`
	// DatasetSHA is the commit whose tree holds a relative DatasetPath when
	// the job measures the head alone: the pull request's base, never the
	// head, so a pull request cannot choose its own prompts. An interleaved
	// job reads it from its base side.
	DatasetSHA     string      `json:"dataset_sha,omitempty"`
	InputLen       int         `json:"input_len,omitempty"`
	OutputLen      int         `json:"output_len,omitempty"`
	NumPrompts     int         `json:"num_prompts"`
	RequestRate    result.Rate `json:"request_rate"`
	Burstiness     float64     `json:"burstiness,omitempty"`
	MaxConcurrency int         `json:"max_concurrency,omitempty"`
	Seed           int64       `json:"seed,omitempty"`
	Temperature    float64     `json:"temperature,omitempty"`
	Timeout        Duration    `json:"timeout,omitempty"`
	// Traffic is the workload's shape (sessions, prompt mix, model mix);
	// nil for the plain workload.
	Traffic *result.Traffic `json:"traffic,omitempty"`
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

// Commits names what a job measures: Head alone, or Base and Head
// interleaved on one card.
type Commits struct {
	Repo string
	Head string
	// Base is measured alongside Head when the tier interleaves (tiers.X.
	// interleave, pairs) or Interleave says so; otherwise it is unused.
	Base       string
	Interleave *Interleave
}

// PlanAt is the plan of one tier of a repository's config, measuring the
// commits c names: an interleaved plan when c has a base and the tier (or
// c.Interleave) asks for interleaving.
func PlanAt(cfg *config.Config, tier string, c Commits) (Plan, error) {
	p, err := PlanFromConfig(cfg, tier)
	if err != nil {
		return Plan{}, err
	}
	p.Repo, p.HeadSHA = c.Repo, c.Head
	il := c.Interleave
	if il == nil && c.Base != "" {
		if t, err := cfg.Tier(tier); err == nil && t.Interleave {
			il = &Interleave{Pairs: t.Pairs, Order: OrderABBA}
		}
	}
	if il != nil {
		cp := *il
		p.BaseSHA, p.Interleave = c.Base, &cp
	} else if c.Base != "" && c.Base != c.Head && p.Workload.DatasetPath != "" && !filepath.IsAbs(p.Workload.DatasetPath) {
		p.Workload.DatasetSHA = c.Base
	}
	if err := p.Validate(); err != nil {
		return Plan{}, err
	}
	return p, nil
}

// PlanFromConfig builds the plan of one tier of a repository's config.
// Repo and the commits are left for the caller to set (PlanAt sets them).
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
			// server.port is where the engine listens inside its
			// container; the host port is the agent's to pick.
			ContainerPort: containerPort(s),
			Build:         buildOf(s.Build),
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
			Traffic:        w.Traffic(),
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

func containerPort(s config.Server) int {
	if s.Image == "" {
		return 0
	}
	return s.Port
}

func buildOf(b config.Build) *Build {
	if len(b.Command) == 0 {
		return nil
	}
	return &Build{Command: append([]string(nil), b.Command...), Image: b.Image, Timeout: Duration(b.Timeout.D())}
}

// shaPattern is a commit id as the plan names it: lower-case hex.
var shaPattern = regexp.MustCompile(`^[0-9a-f]{4,64}$`)

// IsCommitID reports whether s is a commit id as a plan names it (the
// server checks a source request's SHA with it).
func IsCommitID(s string) bool { return shaPattern.MatchString(s) }

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
	if p.Warmup < 0 {
		errs = append(errs, fmt.Errorf("plan warmup is %d: must be >= 0", p.Warmup))
	}
	if p.Workload.NumPrompts < 1 {
		errs = append(errs, fmt.Errorf("plan num_prompts is %d: must be >= 1", p.Workload.NumPrompts))
	}
	if err := p.Workload.Traffic.Check(); err != nil {
		errs = append(errs, fmt.Errorf("plan workload: %w", err))
	}
	if p.MaxErrorRate < 0 || p.MaxErrorRate > 1 {
		errs = append(errs, fmt.Errorf("plan max_error_rate is %g: must be in [0, 1]", p.MaxErrorRate))
	}
	for _, c := range []struct{ name, sha string }{{"head_sha", p.HeadSHA}, {"base_sha", p.BaseSHA}, {"workload.dataset_sha", p.Workload.DatasetSHA}} {
		if c.sha != "" && !shaPattern.MatchString(c.sha) {
			errs = append(errs, fmt.Errorf("plan %s %q is not a commit id (lower-case hex)", c.name, c.sha))
		}
	}
	if il := p.Interleave; il != nil {
		if p.HeadSHA == "" || p.BaseSHA == "" {
			errs = append(errs, errors.New("plan interleave needs both head_sha and base_sha"))
		}
		if il.Pairs < 0 || il.Pairs > MaxPairs {
			errs = append(errs, fmt.Errorf("plan interleave pairs is %d: must be in [1, %d] (0 means %d)", il.Pairs, MaxPairs, DefaultPairs))
		}
		if il.Order != "" && il.Order != OrderABBA {
			errs = append(errs, fmt.Errorf("plan interleave order %q: the only order is %q", il.Order, OrderABBA))
		}
	} else if p.Repeats < 1 {
		errs = append(errs, fmt.Errorf("plan repeats is %d: must be >= 1", p.Repeats))
	}
	if pr := p.Profile; pr != nil {
		if pr.Requests < 1 {
			errs = append(errs, fmt.Errorf("plan profile requests is %d: must be >= 1", pr.Requests))
		}
		if p.Interleave != nil {
			errs = append(errs, errors.New("plan profile: a profiling pass does not interleave"))
		}
	}
	errs = append(errs, p.validateLongRun()...)
	if b := p.Engine.Build; b != nil && len(b.Command) == 0 {
		errs = append(errs, errors.New("plan engine build has no command"))
	}
	for k := range p.Engine.Env {
		if strings.HasPrefix(strings.ToUpper(k), "PERFGATE_") {
			errs = append(errs, fmt.Errorf("plan engine env %s: PERFGATE_* variables are the runner's own and never reach an engine", k))
		}
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
	// Code names a refusal a client acts on (CodeRunStored, CodeLogFull).
	Code string `json:"code,omitempty"`
	// Length is the accepted log length, on 416 only.
	Length *int64 `json:"length,omitempty"`
}

// RegisterRequest is POST /api/v1/agents/register (Bearer: the
// registration token).
type RegisterRequest struct {
	Name     string   `json:"name"`
	Labels   []string `json:"labels"`
	GPUUUIDs []string `json:"gpu_uuids"`
	// Cards describe the GPUs (model, memory, driver); the server adds
	// the labels they give (fleet.CardLabels) to Labels.
	Cards []fleet.Card `json:"cards,omitempty"`
	// PreviousToken is the agent token the name holds now: a runner that
	// registers again under its name presents it. Without it a name in use
	// is refused (409): the registration token alone cannot take over a
	// live runner.
	PreviousToken string `json:"previous_token,omitempty"`
	// Token is the agent token the runner proposes (NewToken's form). The
	// runner saves it before sending and proposes the same one until an
	// answer comes, so a registration whose answer was lost — the runner
	// stopped, the connection dropped — is the same registration when
	// retried, and the runner always ends with the token the server holds.
	// Empty: the server makes one.
	Token string `json:"token,omitempty"`
}

// MaxCards is the most GPUs one agent may report.
const MaxCards = 64

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

// Refusal codes of ErrorBody.Code.
const (
	// CodeRunStored: the run already has a result under another key (409).
	CodeRunStored = "run_stored"
	// CodeLogFull: the job's log reached MaxJobLog (413).
	CodeLogFull = "log_full"
)

// Limits of what one job may store.
const (
	// MaxIdempotencyKey is the longest idempotency key accepted, in bytes.
	MaxIdempotencyKey = 200
	// MaxJobLog is the most log bytes one attempt of a job may store; the
	// agent truncates its log to fit.
	MaxJobLog = 16 << 20
)

// ResultRequest uploads one run's result.
type ResultRequest struct {
	LeaseID        string `json:"lease_id"`
	IdempotencyKey string `json:"idempotency_key"`
	// RunIndex is the run's position in the plan's Schedule.
	RunIndex int    `json:"run_index"`
	Kind     string `json:"kind"` // "measured" or "warmup"
	// Side and Pair place a run of an interleaved job ("base" or "head",
	// and the pair index); they must match the plan's Schedule.
	Side   string          `json:"side,omitempty"`
	Pair   int             `json:"pair,omitempty"`
	Result json.RawMessage `json:"result"`
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
