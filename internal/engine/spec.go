package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// Defaults of a Spec.
const (
	DefaultReadinessPath = "/health"
	DefaultStartTimeout  = 10 * time.Minute
	DefaultStopGrace     = 30 * time.Second
	DefaultContainerPort = 8000 // vLLM's OpenAI server inside its image
	DefaultLogLimit      = 1 << 20
)

// Spec says how to run one inference server for one job. It comes from the
// server-side (base-branch) configuration, never from the pull request: a
// PR must not choose what runs on a GPU host. Enforcing that is the
// caller's job; Start trusts its Spec.
type Spec struct {
	// Image runs the server in Docker: name@sha256:<digest>. Tags are
	// refused because they move.
	Image string
	// Command runs the server as a process instead: an argv template whose
	// elements may use {{.Port}}, {{.Model}}, {{.GPU}} and {{.JobID}}. It is
	// rendered element by element and run without a shell.
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
	Env           map[string]string
	DockerBinary  string // "docker" when empty
	ContainerPort int    // port the image listens on; DefaultContainerPort when 0
	// Output, when set, also receives the server's stdout and stderr.
	Output io.Writer
	// LogLimit bounds the captured output kept in memory (the tail);
	// DefaultLogLimit when 0.
	LogLimit int
}

// digestRef is an image pinned by content: name@sha256:<64 hex>.
var digestRef = regexp.MustCompile(`^[^@\s]+@sha256:[0-9a-f]{64}$`)

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
			errs = append(errs, fmt.Errorf("image %q is not pinned by digest: use name@sha256:<64 hex digits> (docker images --digests shows it); a tag can move between runs", s.Image))
		}
		if s.GPUUUID == "" {
			errs = append(errs, errors.New("image engine needs a GPU UUID: a container must not get every GPU"))
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
	return errors.Join(errs...)
}

// ContainerName is the Docker container name of a job's engine.
func ContainerName(jobID string) string {
	return "perfgate-" + nameUnsafe.ReplaceAllString(jobID, "-")
}

// JobLabel is the Docker label that marks perfgate's engine containers, so a
// restarted agent can find and remove the ones it left behind.
const JobLabel = "perfgate.job"

// dockerArgv is the `docker run` command line of an image engine on port.
func (s Spec) dockerArgv(port int) []string {
	argv := []string{s.DockerBinary, "run", "--rm",
		"--name", ContainerName(s.JobID),
		"--label", JobLabel + "=" + s.JobID,
		// The quotes are part of the value: --gpus parses CSV, and a quoted
		// field keeps a device list together.
		"--gpus", `"device=` + s.GPUUUID + `"`,
		"--ipc=host",
		"-p", fmt.Sprintf("127.0.0.1:%d:%d", port, s.ContainerPort),
		"-e", "HF_HUB_OFFLINE=1",
	}
	for _, k := range sortedKeys(s.Env) {
		argv = append(argv, "-e", k+"="+s.Env[k])
	}
	argv = append(argv, s.Image, "--model", s.Model)
	return append(argv, s.Args...)
}

// templateData is what a command template may use.
type templateData struct {
	Port  int
	Model string
	GPU   string
	JobID string
}

// commandArgv renders the command template for port, element by element.
func (s Spec) commandArgv(port int) ([]string, error) {
	data := templateData{Port: port, Model: s.Model, GPU: s.GPUUUID, JobID: s.JobID}
	elems := append(append([]string(nil), s.Command...), s.Args...)
	argv := make([]string, len(elems))
	for i, e := range elems {
		t, err := template.New("arg").Option("missingkey=error").Parse(e)
		if err != nil {
			return nil, fmt.Errorf("command element %d %q: %w", i, e, err)
		}
		var b bytes.Buffer
		if err := t.Execute(&b, data); err != nil {
			return nil, fmt.Errorf("command element %d %q: %w (placeholders: {{.Port}}, {{.Model}}, {{.GPU}}, {{.JobID}})", i, e, err)
		}
		argv[i] = b.String()
	}
	if argv[0] == "" {
		return nil, errors.New("command template renders an empty program name")
	}
	return argv, nil
}

// commandEnv is the environment of a command engine: the agent's, the
// spec's, and last (so nothing overrides it) the GPU pin.
func (s Spec) commandEnv() []string {
	env := os.Environ()
	env = append(env, "HF_HUB_OFFLINE=1")
	for _, k := range sortedKeys(s.Env) {
		env = append(env, k+"="+s.Env[k])
	}
	if s.GPUUUID != "" {
		env = append(env, "CUDA_VISIBLE_DEVICES="+s.GPUUUID)
	}
	return env
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
