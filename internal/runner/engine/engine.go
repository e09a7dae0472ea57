// Package engine starts and stops the inference server a job measures: a
// pinned Docker image on one GPU selected by UUID, or a command template,
// and waits until it serves the job's model.
//
// The Spec comes from the server-side (base-branch) configuration: never
// run a command or image a pull request supplies on a GPU host.
package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/runner/sandbox"
)

// tailLines is how much of the engine's output an error quotes.
const tailLines = 30

// Server is one running inference server.
type Server struct {
	spec    Spec
	log     zerolog.Logger
	baseURL string
	port    int
	argv    []string
	cmd     *exec.Cmd
	logs    *ringBuffer
	started time.Time

	exited  chan struct{}
	exitErr error // set before exited is closed

	startup   time.Duration
	enginePID int // host PID of the engine's root process; see PID
	net       *sandbox.Net

	stopOnce sync.Once
	stopErr  error
}

// Start launches the server described by spec and waits until GET
// ReadinessPath answers 200 and GET /v1/models lists spec.Model. If the
// process exits first it fails at once; after StartTimeout it fails with
// "engine not ready after …". Either way the error quotes the tail of the
// server's output and the server is stopped before Start returns, so a
// failed start never holds the GPU.
func Start(ctx context.Context, spec Spec, log zerolog.Logger) (*Server, error) {
	spec = spec.withDefaults()
	if err := spec.validate(); err != nil {
		return nil, fmt.Errorf("engine spec: %w", err)
	}
	port := spec.Port
	if port == 0 {
		p, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("pick a port for the engine: %w", err)
		}
		port = p
	}
	s := &Server{
		spec:    spec,
		log:     log,
		port:    port,
		baseURL: "http://127.0.0.1:" + strconv.Itoa(port),
		logs:    newRingBuffer(spec.LogLimit),
		exited:  make(chan struct{}),
	}
	var err error
	if spec.Image != "" {
		// Verified before each run: a tag pinned to a local ID must still
		// point at it, and the container runs the ID.
		if spec.Image, err = ResolveImage(ctx, spec.DockerBinary, spec.Image); err != nil {
			return nil, err
		}
		s.spec = spec
		if s.argv, err = spec.dockerArgv(); err != nil {
			return nil, fmt.Errorf("engine args: %w", err)
		}
		s.net = &sandbox.Net{Docker: spec.DockerBinary, Name: ContainerName(spec.JobID), Job: spec.JobID, Agent: spec.Agent, RelayImage: spec.RelayImage}
		if err := s.net.Create(ctx); err != nil {
			return nil, err
		}
	} else if s.argv, err = spec.commandArgv(port); err != nil {
		return nil, fmt.Errorf("engine command: %w", err)
	}

	// Not CommandContext: the process must outlive a cancelled start only
	// as long as Stop takes, and Stop signals the whole group.
	s.cmd = exec.Command(s.argv[0], s.argv[1:]...)
	if spec.Image == "" {
		s.cmd.Env = spec.commandEnv()
		s.cmd.Dir = spec.Workdir
	} else {
		s.cmd.Env = spec.dockerEnv()
	}
	var out io.Writer = s.logs
	if spec.Output != nil {
		// The engine's output is the pull request's to choose: Output (the
		// job log, the agent's log) gets the first OutputLimit bytes, or
		// what is left of the job's OutputBudget.
		budget := spec.OutputBudget
		if budget == nil {
			budget = NewOutputBudget(spec.OutputLimit)
		}
		out = io.MultiWriter(s.logs, forgiving{&capWriter{w: spec.Output, budget: budget}})
	}
	s.cmd.Stdout, s.cmd.Stderr = out, out
	s.cmd.SysProcAttr = procAttr()
	// A worker that outlives the server keeps the output pipe open; Wait
	// must still report the server's exit promptly.
	s.cmd.WaitDelay = time.Second

	log = log.With().Str("engine", s.describe()).Int("port", port).Logger()
	s.log = log
	s.started = time.Now()
	if err := s.cmd.Start(); err != nil {
		if s.net != nil {
			_ = s.net.Remove(context.WithoutCancel(ctx))
		}
		return nil, fmt.Errorf("start engine %s: %w", s.argv[0], err)
	}
	s.enginePID = s.cmd.Process.Pid
	log.Info().Int("pid", s.cmd.Process.Pid).Strs("argv", s.argv).Msg("engine starting")
	go func() {
		s.exitErr = s.cmd.Wait()
		close(s.exited)
	}()

	err = nil
	if s.net != nil {
		err = s.publish(ctx)
	}
	if err == nil {
		err = s.waitReady(ctx)
	}
	if err != nil {
		// A fresh context: ctx may be what ended the start.
		sctx, cancel := context.WithTimeout(context.Background(), spec.StopGrace+30*time.Second)
		defer cancel()
		if serr := s.Stop(sctx); serr != nil {
			log.Error().Err(serr).Msg("stop engine after failed start")
		}
		return nil, err
	}
	s.startup = time.Since(s.started)
	if spec.Image != "" {
		s.enginePID = s.containerPID(ctx)
	}
	log.Info().Dur("startup", s.startup).Msg("engine ready")
	return s, nil
}

// publish puts the relay in front of the sandboxed container once it has
// an address on its network, on the host port picked (or another free
// one if that was taken meanwhile).
func (s *Server) publish(ctx context.Context) error {
	actx, cancel := context.WithTimeout(ctx, s.spec.StartTimeout)
	defer cancel()
	ip, err := s.net.EngineAddr(actx, ContainerName(s.spec.JobID), s.exited)
	if err != nil {
		tail := s.logs.Tail(tailLines)
		if strings.Contains(tail, "error setting rlimit") {
			// runc's words for a ulimit above what the daemon may grant.
			err = fmt.Errorf("%w (the engine's ulimits exceed what the Docker daemon may grant: lower the agent's --engine-nofile or --engine-nproc)", err)
		}
		return fmt.Errorf("engine container: %w; last output:\n%s", err, tail)
	}
	for try := 0; ; try++ {
		err = s.net.StartRelay(ctx, ip, s.spec.ContainerPort, s.port)
		if err == nil || try == 2 || !strings.Contains(err.Error(), "already allocated") {
			return err
		}
		// Another process took the port between the pick and the bind.
		p, perr := freePort()
		if perr != nil {
			return fmt.Errorf("pick a port for the engine: %w", perr)
		}
		s.port, s.baseURL = p, "http://127.0.0.1:"+strconv.Itoa(p)
	}
}

// BaseURL is the server's root, e.g. http://127.0.0.1:8000.
func (s *Server) BaseURL() string { return s.baseURL }

// Port is the host port the server listens on.
func (s *Server) Port() int { return s.port }

// PID is the host PID of the engine's root process: the command's process,
// or the container's init process for an image (0 when Docker would not
// say). The engine's GPU processes are it and its descendants.
func (s *Server) PID() int { return s.enginePID }

// ClientPID is the PID of the process Start ran: the engine itself, or the
// `docker run` client.
func (s *Server) ClientPID() int { return s.cmd.Process.Pid }

// Argv is the command line Start ran.
func (s *Server) Argv() []string { return append([]string(nil), s.argv...) }

// StartupDuration is the time from launch to readiness.
func (s *Server) StartupDuration() time.Duration { return s.startup }

// Logs is the captured stdout and stderr: the last Spec.LogLimit bytes.
func (s *Server) Logs() []byte { return s.logs.Bytes() }

// LogTail is the last n lines of output.
func (s *Server) LogTail(n int) string { return s.logs.Tail(n) }

// Exited is closed when the server process ends, whether it crashed or
// was stopped; ExitErr then says how.
func (s *Server) Exited() <-chan struct{} { return s.exited }

// ExitErr is the process's exit error once Exited is closed (nil for a clean
// exit), and nil before.
func (s *Server) ExitErr() error {
	select {
	case <-s.exited:
		return s.exitErr
	default:
		return nil
	}
}

// CrashError describes an exit that nobody asked for, for a job's failure
// reason; nil while the server runs.
func (s *Server) CrashError() error {
	select {
	case <-s.exited:
	default:
		return nil
	}
	return fmt.Errorf("engine exited after %s (%s); last output:\n%s",
		time.Since(s.started).Round(time.Millisecond), exitText(s.exitErr), s.logs.Tail(tailLines))
}

// Stop ends the server: SIGTERM to its process group (or `docker stop`),
// StopGrace to exit, then SIGKILL (or `docker rm -f`). It is idempotent and
// safe to defer with a fresh context.
func (s *Server) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		if s.spec.Image != "" {
			s.stopErr = s.stopContainer(ctx)
		} else {
			s.stopErr = s.stopGroup(ctx)
		}
		if s.stopErr != nil {
			s.log.Error().Err(s.stopErr).Msg("engine stop")
		} else {
			s.log.Info().Msg("engine stopped")
		}
	})
	return s.stopErr
}

func (s *Server) describe() string {
	if s.spec.Image != "" {
		return s.spec.Image
	}
	return s.spec.Command[0]
}

// waitReady polls readiness until the server serves the model, exits, or
// runs out of time.
func (s *Server) waitReady(ctx context.Context) error {
	deadline := time.NewTimer(s.spec.StartTimeout)
	defer deadline.Stop()
	client := &http.Client{Timeout: 2 * time.Second}
	last := "no answer yet"
	wait := 50 * time.Millisecond
	for {
		ok, status, err := s.probe(ctx, client)
		if err != nil {
			return err // up, but not serving the job's model
		}
		if ok {
			return nil
		}
		last = status
		select {
		case <-s.exited:
			return fmt.Errorf("engine exited during start-up after %s (%s); last output:\n%s",
				time.Since(s.started).Round(time.Millisecond), exitText(s.exitErr), s.logs.Tail(tailLines))
		case <-deadline.C:
			return fmt.Errorf("engine not ready after %s: last check %s; last output:\n%s",
				s.spec.StartTimeout, last, s.logs.Tail(tailLines))
		case <-ctx.Done():
			return fmt.Errorf("engine start: %w (last check %s)", ctx.Err(), last)
		case <-time.After(wait):
		}
		wait = min(wait*2, time.Second)
	}
}

// probe checks readiness once: ok when health is 200 and the model is
// listed; a non-nil error when the server is up but will never serve the
// model; else status says what the last check saw.
func (s *Server) probe(ctx context.Context, client *http.Client) (ok bool, status string, err error) {
	code, _, gerr := get(ctx, client, s.baseURL+s.spec.ReadinessPath)
	if gerr != nil {
		return false, "GET " + s.spec.ReadinessPath + ": " + gerr.Error(), nil
	}
	if code != http.StatusOK {
		return false, fmt.Sprintf("GET %s: %d %s", s.spec.ReadinessPath, code, http.StatusText(code)), nil
	}
	code, body, gerr := get(ctx, client, s.baseURL+"/v1/models")
	if gerr != nil {
		return false, "GET /v1/models: " + gerr.Error(), nil
	}
	if code != http.StatusOK {
		return false, fmt.Sprintf("GET /v1/models: %d %s", code, http.StatusText(code)), nil
	}
	var models struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if jerr := json.Unmarshal(body, &models); jerr != nil {
		return false, "GET /v1/models: " + jerr.Error(), nil
	}
	if s.spec.Model == "" {
		return true, "", nil
	}
	var ids []string
	for _, m := range models.Data {
		if m.ID == s.spec.Model {
			return true, "", nil
		}
		ids = append(ids, m.ID)
	}
	if len(ids) == 0 {
		// Up, but no model yet: an engine that loads or creates its model
		// after it starts listening (Ollama's `ollama create`) lists it
		// when it can serve it.
		return false, fmt.Sprintf("GET /v1/models: no model yet (waiting for %q)", s.spec.Model), nil
	}
	return false, "", fmt.Errorf("engine is up but /v1/models does not list model %q (it serves %s): check the model name in the engine config",
		s.spec.Model, quoteList(ids))
}

// stopGroup signals the command's whole process group: an engine's workers
// hold GPU memory too.
func (s *Server) stopGroup(ctx context.Context) error {
	pgid := s.cmd.Process.Pid
	if !groupAlive(pgid) {
		<-s.exited
		return nil
	}
	signalGroup(pgid, false)
	if s.waitGone(ctx, pgid, s.spec.StopGrace) {
		return nil
	}
	s.log.Warn().Dur("grace", s.spec.StopGrace).Msg("engine ignored SIGTERM: killing it")
	signalGroup(pgid, true)
	// Not ctx: SIGKILL takes effect at once, and a spent ctx must not turn
	// a dead engine into a reported failure.
	if s.waitGone(context.Background(), pgid, 10*time.Second) {
		return nil
	}
	return fmt.Errorf("engine process group %d still running after SIGKILL", pgid)
}

// waitGone waits until the leader has been reaped and no member of the group
// is left, for at most d.
func (s *Server) waitGone(ctx context.Context, pgid int, d time.Duration) bool {
	timeout := time.NewTimer(d)
	defer timeout.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-s.exited:
			if !groupAlive(pgid) {
				return true
			}
		default:
		}
		select {
		case <-tick.C:
		case <-timeout.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

func get(ctx context.Context, client *http.Client, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, body, err
}

// freePort asks the kernel for a free loopback port. Another process may
// take it before the engine binds it; the start then fails and is retried
// by the job's retry policy.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ProcessState.String()
	}
	return err.Error()
}

func quoteList(ids []string) string {
	if len(ids) == 0 {
		return "no models"
	}
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = strconv.Quote(id)
	}
	return strings.Join(q, ", ")
}

// forgiving drops write errors: a failing log sink must not stop the copy
// of the engine's output, or the engine blocks on a full pipe.
type forgiving struct{ w io.Writer }

func (f forgiving) Write(p []byte) (int, error) {
	_, _ = f.w.Write(p)
	return len(p), nil
}

// trimOutput shortens a command's output for an error message.
func trimOutput(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 500 {
		b = append(b[:500:500], "…"...)
	}
	return string(b)
}
