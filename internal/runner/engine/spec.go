package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/perfgate/perfgate/internal/runner/sandbox"
)

// Defaults of a Spec.
const (
	DefaultReadinessPath = "/health"
	DefaultStartTimeout  = 10 * time.Minute
	DefaultStopGrace     = 30 * time.Second
	DefaultContainerPort = 8000 // vLLM's OpenAI server inside its image
	DefaultLogLimit      = 1 << 20
	DefaultOutputLimit   = 8 << 20
)

// Spec says how to run one inference server for one job. It comes from the
// server-side (base-branch) configuration, never from the pull request: a
// PR must not choose what runs on a GPU host. Enforcing that is the
// caller's job; Start trusts its Spec.
type Spec struct {
	// Image runs the server in Docker, inside the sandbox: name@sha256:
	// <repository digest>, a local image's ID sha256:<id> (what a build
	// step made, a `docker load`ed image), or a local tag pinned to its ID,
	// name:tag@sha256:<id> (ResolveImage verifies it before each run).
	// Bare tags are refused because they move.
	Image string
	// Command runs the server as a process instead, outside any container:
	// an argv template (see TemplateData) rendered element by element and
	// run without a shell, in Workdir when set.
	Command []string
	Model   string   // served model id; must appear in /v1/models
	Args    []string // appended: after the image's --model, or after Command (rendered too)
	Port    int      // host port on 127.0.0.1; 0 picks a free one
	// GPUUUID selects the card, by UUID and never by index. Required for
	// Image; for Command it sets CUDA_VISIBLE_DEVICES when not empty.
	GPUUUID       string
	ReadinessPath string        // DefaultReadinessPath when empty
	StartTimeout  time.Duration // DefaultStartTimeout when 0
	StopGrace     time.Duration // SIGTERM/docker stop grace; DefaultStopGrace when 0
	JobID         string        // names and labels the container; required for Image
	Agent         string        // labels the container with the agent that runs it
	// Env is added to the engine's environment; a PERFGATE_* name is
	// refused. A command engine otherwise gets only the agent variables
	// sandbox.CommandAllow and AllowEnv name; a container only its image's.
	Env           map[string]string
	AllowEnv      []string
	DockerBinary  string // "docker" when empty
	ContainerPort int    // port the image listens on; DefaultContainerPort when 0
	// Workdir is the commit's checkout on the host: an image engine gets it
	// read-only at /workspace (and its working directory there), a command
	// engine runs in it. SHA is the commit.
	Workdir string
	SHA     string
	// ModelsDir is the runner's model directory: read-only at /models in a
	// container, {{.Models}} in templates.
	ModelsDir string
	// ProfileDir, for a profiling pass, is where the engine writes its
	// traces: VLLM_TORCH_PROFILER_DIR names it (a command engine), or names
	// ProfileMount, where it is mounted writable (an image engine).
	ProfileDir string
	// Sandbox contains an image engine; RelayImage is the relay the agent
	// built (sandbox.EnsureRelayImage), required for an image.
	Sandbox    sandbox.Policy
	RelayImage string
	// NoGPU runs an image engine without --gpus: for hosts without the
	// NVIDIA container runtime (tests), never for a measurement.
	NoGPU bool
	// Output, when set, also receives the server's stdout and stderr.
	Output io.Writer
	// LogLimit bounds the captured output kept in memory (the tail);
	// DefaultLogLimit when 0.
	LogLimit int
	// OutputLimit bounds what Output receives from this start (then a
	// note says the rest was dropped); DefaultOutputLimit when 0.
	// OutputBudget, when set, bounds it instead, shared with every other
	// start given the same budget: the agent gives one to each job.
	OutputLimit  int64
	OutputBudget *OutputBudget
}

// digestRef is an image pinned by content: name@sha256:<64 hex>, or a
// local image's id.
var digestRef = regexp.MustCompile(`^([^@\s]+@)?sha256:[0-9a-f]{64}$`)

// nameUnsafe is what Docker refuses in a container name.
var nameUnsafe = regexp.MustCompile(`[^a-zA-Z0-9_.-]`)

func (s Spec) withDefaults() Spec {
	if s.ReadinessPath == "" {
		s.ReadinessPath = DefaultReadinessPath
	}
	if !strings.HasPrefix(s.ReadinessPath, "/") {
		s.ReadinessPath = "/" + s.ReadinessPath
	}
	if s.StartTimeout <= 0 {
		s.StartTimeout = DefaultStartTimeout
	}
	if s.StopGrace <= 0 {
		s.StopGrace = DefaultStopGrace
	}
	if s.DockerBinary == "" {
		s.DockerBinary = "docker"
	}
	if s.ContainerPort == 0 {
		s.ContainerPort = DefaultContainerPort
	}
	if s.LogLimit <= 0 {
		s.LogLimit = DefaultLogLimit
	}
	if s.OutputLimit <= 0 {
		s.OutputLimit = DefaultOutputLimit
	}
	return s
}

// validate reports every problem of the spec at once.
func (s Spec) validate() error {
	var errs []error
	switch {
	case s.Image != "" && len(s.Command) > 0:
		errs = append(errs, errors.New("engine spec has both an image and a command: choose one"))
	case s.Image == "" && len(s.Command) == 0:
		errs = append(errs, errors.New("engine spec has neither an image nor a command"))
	}
	if s.Image != "" {
		if !digestRef.MatchString(s.Image) {
			errs = append(errs, fmt.Errorf("image %q is not pinned by digest or local ID: use name@sha256:<repository digest> (docker images --digests), a local image ID sha256:<id>, or a local tag pinned to its ID, name:tag@sha256:<id> (docker image inspect --format {{.Id}} name:tag); a bare tag can move between runs", s.Image))
		}
		if s.GPUUUID == "" && !s.NoGPU {
			errs = append(errs, errors.New("image engine needs a GPU UUID: a container must not get every GPU"))
		}
		if s.RelayImage == "" {
			errs = append(errs, errors.New("image engine needs the sandbox relay image: the agent builds it at start (its log says why it could not)"))
		}
		if s.JobID == "" {
			errs = append(errs, errors.New("image engine needs a job id to name and label its container"))
		}
		if s.Model == "" {
			errs = append(errs, errors.New("image engine needs a model"))
		}
	}
	if s.GPUUUID != "" {
		if _, err := strconv.Atoi(s.GPUUUID); err == nil {
			errs = append(errs, fmt.Errorf("GPU %q is an index: select the GPU by UUID (nvidia-smi -L lists them)", s.GPUUUID))
		} else if strings.ContainsAny(s.GPUUUID, `,"' `) {
			errs = append(errs, fmt.Errorf("GPU %q is not one UUID", s.GPUUUID))
		}
	}
	if s.Port < 0 || s.Port > 65535 {
		errs = append(errs, fmt.Errorf("port %d out of range", s.Port))
	}
	for k := range s.Env {
		if k == "" || strings.ContainsAny(k, "= ") {
			errs = append(errs, fmt.Errorf("environment variable name %q is not valid", k))
		}
	}
	if err := sandbox.CheckEnv(s.Env); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ContainerName is the Docker container name of a job's engine.
func ContainerName(jobID string) string {
	return "perfgate-" + nameUnsafe.ReplaceAllString(jobID, "-")
}

// JobLabel is the Docker label that marks perfgate's engine containers, so a
// restarted agent can find and remove the ones it left behind.
const JobLabel = sandbox.Label

// dockerArgv is the `docker run` command line of an image engine: the
// sandbox's containment, the checkout and models mounted read-only, and
// after the image, --model and the rendered args.
func (s Spec) dockerArgv() ([]string, error) {
	data := s.templateData(s.ContainerPort, true)
	args, err := renderAll(s.Args, data)
	if err != nil {
		return nil, err
	}
	c := sandbox.Container{
		Name: ContainerName(s.JobID), Job: s.JobID, Agent: s.Agent, Network: ContainerName(s.JobID),
		Image: s.Image, Args: append([]string{"--model", s.Model}, args...), Env: s.Env,
	}
	if !s.NoGPU {
		c.GPU = s.GPUUUID
	}
	c.Card = s.GPUUUID
	if s.Workdir != "" {
		c.Mounts = append(c.Mounts, sandbox.Mount{Source: s.Workdir, Target: sandbox.Workspace})
		c.Workdir = sandbox.Workspace
	}
	if s.ModelsDir != "" {
		c.Mounts = append(c.Mounts, sandbox.Mount{Source: s.ModelsDir, Target: sandbox.Models})
	}
	if s.ProfileDir != "" {
		c.Mounts = append(c.Mounts, sandbox.Mount{Source: s.ProfileDir, Target: ProfileMount, Writable: true})
		c.Env = withEnv(c.Env, ProfilerDirEnv, ProfileMount)
	}
	return append([]string{s.DockerBinary}, s.Sandbox.RunArgv(c)...), nil
}

// TemplateData is what an engine's command, args and build templates may
// use (config.Placeholders names the same fields).
type TemplateData struct {
	Port    int    // the port the engine listens on (inside its container for an image)
	Model   string // the served model
	GPU     string // the card's UUID
	JobID   string
	Workdir string // the checkout: /workspace in a container, the host path for a command
	SHA     string // the commit
	Models  string // the runner's model directory: /models in a container
	Image   string // the pinned base image (build templates)
}

func (s Spec) templateData(port int, inContainer bool) TemplateData {
	d := TemplateData{Port: port, Model: s.Model, GPU: s.GPUUUID, JobID: s.JobID, Workdir: s.Workdir, SHA: s.SHA, Models: s.ModelsDir, Image: s.Image}
	if inContainer {
		if s.Workdir != "" {
			d.Workdir = sandbox.Workspace
		}
		if s.ModelsDir != "" {
			d.Models = sandbox.Models
		}
	}
	return d
}

// Render renders one template element with data; an unknown placeholder
// is an error that lists the known ones.
func Render(elem string, data TemplateData) (string, error) {
	t, err := template.New("arg").Option("missingkey=error").Parse(elem)
	if err != nil {
		return "", fmt.Errorf("template %q: %w", elem, err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return "", fmt.Errorf("template %q: %w (placeholders: {{.Port}}, {{.Model}}, {{.GPU}}, {{.JobID}}, {{.Workdir}}, {{.SHA}}, {{.Models}}, {{.Image}})", elem, err)
	}
	return b.String(), nil
}

func renderAll(elems []string, data TemplateData) ([]string, error) {
	out := make([]string, len(elems))
	for i, e := range elems {
		r, err := Render(e, data)
		if err != nil {
			return nil, fmt.Errorf("element %d: %w", i, err)
		}
		out[i] = r
	}
	return out, nil
}

// commandArgv renders the command template for port, element by element.
func (s Spec) commandArgv(port int) ([]string, error) {
	argv, err := renderAll(append(append([]string(nil), s.Command...), s.Args...), s.templateData(port, false))
	if err != nil {
		return nil, fmt.Errorf("command %w", err)
	}
	if argv[0] == "" {
		return nil, errors.New("command template renders an empty program name")
	}
	return argv, nil
}

// dockerEnv is the environment of the docker client that runs an image
// engine: the allow-list and Docker's own client settings. The container
// gets none of it (only RunArgv's --env), but the client need not hold
// the agent's secrets either.
func (s Spec) dockerEnv() []string {
	allow := append(append([]string(nil), sandbox.CommandAllow...), s.AllowEnv...)
	allow = append(allow, "DOCKER_HOST", "DOCKER_CONFIG", "DOCKER_CONTEXT", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY", "DOCKER_API_VERSION")
	return sandbox.CommandEnv(os.Environ(), allow, nil)
}

// commandEnv is the environment of a command engine: the allow-listed
// variables of the agent's, the spec's, and last (so nothing overrides it)
// the GPU pin. Never the agent's PERFGATE_* variables or its token.
func (s Spec) commandEnv() []string {
	allow := append(append([]string(nil), sandbox.CommandAllow...), s.AllowEnv...)
	extra := s.Env
	if s.ProfileDir != "" {
		extra = withEnv(extra, ProfilerDirEnv, s.ProfileDir)
	}
	env := sandbox.CommandEnv(os.Environ(), allow, extra)
	if s.GPUUUID != "" {
		env = append(env, "CUDA_VISIBLE_DEVICES="+s.GPUUUID)
	}
	return env
}

// ProfilerDirEnv names the directory an engine writes profiler traces to:
// vLLM's torch profiler reads it (and then serves /start_profile and
// /stop_profile), and so does perfgate sim.
const ProfilerDirEnv = "VLLM_TORCH_PROFILER_DIR"

// ProfileMount is where a profiling pass's trace directory is mounted in
// an engine container.
const ProfileMount = "/perfgate-profile"

// withEnv is env with k set to v, env itself untouched.
func withEnv(env map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(env)+1)
	for key, val := range env {
		out[key] = val
	}
	out[k] = v
	return out
}
