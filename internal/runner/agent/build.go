package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/runner/engine"
	"github.com/perfgate/perfgate/internal/runner/sandbox"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
)

// buildRecord is a build's result, kept with the commit in the cache, so
// the same build of the same commit runs once.
type buildRecord struct {
	Argv    []string  `json:"argv"`
	Image   string    `json:"image,omitempty"`    // the tag the build left
	ImageID string    `json:"image_id,omitempty"` // what the engine runs
	Took    string    `json:"took"`
	BuiltAt time.Time `json:"built_at"`
}

// build runs the plan's build step in the side's checkout, unless the
// same build of the commit is cached, and returns the image id it made
// ("" for a build that makes files). A `docker build` runs with no
// network, so the pull request's Dockerfile cannot reach anything either;
// any other build runs the commit's code on the host and needs
// allow_uncontained.
func (a *Agent) build(ctx context.Context, c *agentapi.ClaimResponse, p agentapi.Plan, s *side, uuid string, log zerolog.Logger) (string, error) {
	b := p.Engine.Build
	data := engine.TemplateData{Model: p.Engine.Model, GPU: uuid, JobID: fmt.Sprintf("job-%d-%d", c.JobID, c.Attempt),
		Workdir: s.checkout.Dir, SHA: s.sha, Models: a.cfg.ModelsDir, Image: p.Engine.Image}
	argv := make([]string, len(b.Command))
	for i, e := range b.Command {
		r, err := engine.Render(e, data)
		if err != nil {
			return "", fmt.Errorf("build command element %d: %w", i, err)
		}
		argv[i] = r
	}
	image := ""
	if b.Image != "" {
		r, err := engine.Render(b.Image, data)
		if err != nil {
			return "", fmt.Errorf("build image: %w", err)
		}
		image = r
	}
	argv, contained, err := containBuild(argv)
	if err != nil {
		return "", err
	}
	if !contained && !a.cfg.AllowUncontained {
		return "", fmt.Errorf("server.build %q runs the commit's code on the host: only `docker build` runs contained (with no network); start the agent with --allow-uncontained on a runner whose repositories you trust", strings.Join(argv, " "))
	}
	var spec sandbox.BuildSpec
	if contained {
		// The build line is the runner's (trusted config); it may still
		// name a Dockerfile outside the checkout or hand over a credential.
		if spec, err = sandbox.CheckBuild(argv[buildArgsAt(argv):], s.checkout.Dir); err != nil {
			return "", err
		}
	}
	key := buildKey(argv, image)
	recPath := filepath.Join(s.checkout.Home, "build-"+key+".json")
	if rec, ok := a.cachedBuild(ctx, recPath); ok {
		log.Info().Str("sha", s.sha).Str("image_id", rec.ImageID).Msg("build cached for this commit")
		return rec.ImageID, nil
	}
	timeout := b.Timeout.D()
	if timeout <= 0 {
		timeout = agentapi.DefaultBuildTimeout
	}
	logPath := filepath.Join(s.checkout.Home, "build-"+key+".log")
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return "", fmt.Errorf("build log: %w", err)
	}
	defer lf.Close()
	tail := &tailWriter{max: buildTail}
	bctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(bctx, argv[0], argv[1:]...)
	cmd.Dir = s.checkout.Dir
	allow := append(append([]string(nil), sandbox.CommandAllow...), a.cfg.EngineEnv...)
	allow = append(allow, "DOCKER_HOST", "DOCKER_CONFIG", "DOCKER_CONTEXT", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY", "DOCKER_BUILDKIT")
	cmd.Env = sandbox.CommandEnv(os.Environ(), allow, p.Engine.Env)
	var (
		bld    *sandbox.Builder
		df     []byte
		loaded = map[string]bool{}
	)
	if contained {
		// The build runs in the sealed builder: no route anywhere, its
		// image store only the base images copied in here by ID.
		if bld, err = a.sealedBuilder(ctx, log); err != nil {
			return "", err
		}
		if df, err = sandbox.ReadDockerfile(s.checkout.Dir, spec.Dockerfile); err != nil {
			return "", err
		}
		for _, ref := range sandbox.Images(df, spec.BuildArgs) {
			id, ok, err := bld.Load(ctx, ref)
			if err != nil {
				return "", fmt.Errorf("build: base image %s: %w", ref, err)
			}
			loaded[ref] = ok
			log.Info().Str("image", ref).Str("image_id", id).Bool("on_runner", ok).Msg("base image for the sealed builder")
		}
		cmd.Env = bld.Env(cmd.Env)
	}
	// What a build prints is the pull request's to choose: the log file and
	// the job log keep at most buildLogLimit of it, the error the last
	// buildTail bytes.
	steps := &stepWriter{}
	out := &cappedWriter{w: io.MultiWriter(lf, engineLogWriter{log.With().Str("source", "build").Logger()}), left: buildLogLimit, tail: tail, steps: steps}
	cmd.Stdout, cmd.Stderr = out, out
	// The whole group goes on timeout or cancel: a build spawns compilers.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	log.Info().Str("sha", s.sha).Strs("argv", argv).Dur("timeout", timeout).Str("log", logPath).Msg("build starting")
	start := time.Now()
	err = cmd.Run()
	took := time.Since(start).Round(time.Millisecond)
	if err != nil {
		why := err.Error()
		if errors.Is(bctx.Err(), context.DeadlineExceeded) {
			why = fmt.Sprintf("timed out after %s (server.build.timeout)", timeout)
		}
		if !contained {
			return "", fmt.Errorf("%q failed after %s: %s; last output:\n%s", strings.Join(argv, " "), took, why, tail.String())
		}
		return "", fmt.Errorf("%q failed after %s in perfgate's sealed builder, which reaches no network, no registry and no credential: %s%s; last output:\n%s",
			strings.Join(argv, " "), took, why, explainBuild(spec, df, loaded, steps.last), tail.String())
	}
	rec := buildRecord{Argv: argv, Image: image, Took: took.String(), BuiltAt: time.Now().UTC()}
	if image != "" && bld != nil {
		// Engines run on the host's daemon: the image goes there by ID.
		if err := bld.Export(ctx, image); err != nil {
			return "", fmt.Errorf("the build finished but its image %s did not reach the host: %w", image, err)
		}
		if err := bld.Remove(ctx, image); err != nil {
			log.Warn().Err(err).Str("image", image).Msg("could not untag the build's image in the sealed builder")
		}
	}
	if image != "" {
		id, err := a.imageID(ctx, image)
		if err != nil {
			return "", fmt.Errorf("the build finished but left no image %s (server.build.image): %w", image, err)
		}
		rec.ImageID = id
	}
	if data, err := json.Marshal(rec); err == nil {
		if err := os.WriteFile(recPath, data, 0o644); err != nil {
			log.Warn().Err(err).Msg("could not record the build: it runs again next time")
		}
	}
	log.Info().Str("sha", s.sha).Dur("took", took).Str("image_id", rec.ImageID).Msg("build finished")
	return rec.ImageID, nil
}

// containBuild gives a `docker build` no network and says whether the
// build runs contained. A build template that asks for a network is
// refused: the pull request's Dockerfile would run with it.
func containBuild(argv []string) ([]string, bool, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, false, errors.New("server.build.command renders an empty program name")
	}
	at := -1
	if filepath.Base(argv[0]) == "docker" {
		switch {
		case len(argv) > 1 && argv[1] == "build":
			at = 2
		case len(argv) > 2 && argv[1] == "buildx" && argv[2] == "build":
			at = 3
		case len(argv) > 2 && argv[1] == "image" && argv[2] == "build":
			at = 3
		}
	}
	if at < 0 {
		return argv, false, nil
	}
	for i, a := range argv {
		if a == "--network" || (strings.HasPrefix(a, "--network=") && a != "--network=none") {
			if a == "--network" && i+1 < len(argv) && argv[i+1] == "none" {
				continue
			}
			return nil, false, fmt.Errorf("server.build gives the build a network (%q): the pull request's Dockerfile would run with it; perfgate builds with --network=none", a)
		}
	}
	out := append(append(append([]string(nil), argv[:at]...), "--network=none"), argv[at:]...)
	return out, true, nil
}

// Build output limits: the log (file and job log), and the tail quoted in
// a failure, which reaches the check run.
const (
	buildLogLimit = 1 << 20
	buildTail     = 2 << 10
)

// buildArgsAt is where the arguments of a contained `docker … build` start
// (after the inserted --network=none's subcommand).
func buildArgsAt(argv []string) int {
	if len(argv) > 2 && (argv[1] == "buildx" || argv[1] == "image") {
		return 3
	}
	return 2
}

// sealedBuilder is the runner's sealed builder, started at the first
// build (or attached to Config.BuildHost). A runner that cannot have one
// builds no pull request's Dockerfile.
func (a *Agent) sealedBuilder(ctx context.Context, log zerolog.Logger) (*sandbox.Builder, error) {
	a.builderMu.Lock()
	defer a.builderMu.Unlock()
	if a.builder != nil {
		return a.builder, nil
	}
	var (
		b   *sandbox.Builder
		err error
	)
	if a.cfg.BuildHost != "" {
		b, err = sandbox.AttachBuilder(ctx, a.cfg.BuildHost, a.cfg.Docker)
	} else {
		b, err = sandbox.StartBuilder(context.WithoutCancel(ctx), sandbox.BuilderConfig{Dir: a.cfg.BuilderDir, Docker: a.cfg.Docker, Log: log})
	}
	if err != nil {
		return nil, fmt.Errorf("build: perfgate builds a pull request's Dockerfile only in a sealed builder (a Docker daemon in a network namespace of its own): %w; run the agent as root with Docker's daemon (dockerd) installed, or give it --build-host with the socket of `perfgate build-daemon`", err)
	}
	a.builder = b
	return b, nil
}

// closeBuilder stops the sealed builder the agent started.
func (a *Agent) closeBuilder() {
	a.builderMu.Lock()
	defer a.builderMu.Unlock()
	if a.builder != nil {
		if err := a.builder.Close(); err != nil {
			a.cfg.Log.Warn().Err(err).Msg("stop the sealed builder")
		}
		a.builder = nil
	}
}

// explainBuild says, for a build that failed in the sealed builder, which
// lines of the Dockerfile asked for what it cannot have (BuildKit's parser
// reads them) and where the builder stopped ("" when neither is known).
func explainBuild(spec sandbox.BuildSpec, df []byte, loaded map[string]bool, step string) string {
	var b strings.Builder
	if step != "" {
		fmt.Fprintf(&b, "; the builder stopped at %q", step)
	}
	fs := sandbox.Explain(spec.Dockerfile, df, spec.BuildArgs, func(ref string) bool { return loaded[ref] })
	for i, f := range fs {
		if i == 5 {
			fmt.Fprintf(&b, "; and %d more", len(fs)-i)
			break
		}
		b.WriteString("; ")
		b.WriteString(f.String())
	}
	return b.String()
}

// cappedWriter passes on the first left bytes, then a note that the rest
// was dropped; tail sees everything.
type cappedWriter struct {
	w     io.Writer
	left  int
	tail  *tailWriter
	steps *stepWriter // may be nil
	cut   bool
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	_, _ = c.tail.Write(p) // a tailWriter keeps bytes in memory and never fails
	if c.steps != nil {
		_, _ = c.steps.Write(p)
	}
	if c.left > 0 {
		n := min(len(p), c.left)
		c.left -= n
		if _, err := c.w.Write(p[:n]); err != nil {
			return 0, err
		}
	} else if !c.cut {
		c.cut = true
		fmt.Fprintf(c.w, "\n[perfgate: build output over %d bytes; the rest is not kept]\n", buildLogLimit)
	}
	return len(p), nil
}

func buildKey(argv []string, image string) string {
	h := sha256.New()
	for _, a := range argv {
		h.Write([]byte(a))
		h.Write([]byte{0})
	}
	h.Write([]byte(image))
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// cachedBuild returns the recorded build if its image still exists.
func (a *Agent) cachedBuild(ctx context.Context, path string) (buildRecord, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return buildRecord{}, false
	}
	var rec buildRecord
	if json.Unmarshal(b, &rec) != nil {
		return buildRecord{}, false
	}
	if rec.Image == "" {
		return rec, true
	}
	id, err := a.imageID(ctx, rec.Image)
	return rec, err == nil && id == rec.ImageID
}

func (a *Agent) imageID(ctx context.Context, ref string) (string, error) {
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ictx, a.cfg.Docker, "image", "inspect", "--format", "{{.Id}}", ref).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("docker image inspect %s: %w: %s", ref, err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// builtImages lists the image ids recorded by builds in a commit's home.
func builtImages(home string) []string {
	matches, _ := filepath.Glob(filepath.Join(home, "build-*.json"))
	var ids []string
	for _, m := range matches {
		b, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		var rec buildRecord
		if json.Unmarshal(b, &rec) == nil && rec.ImageID != "" {
			ids = append(ids, rec.ImageID)
		}
	}
	return ids
}

// tailWriter keeps the last max bytes written, for an error message.
type tailWriter struct {
	max int
	buf []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(p), nil
}

func (t *tailWriter) String() string { return strings.TrimSpace(string(t.buf)) }

// stepWriter keeps the last "Step N/M : …" line of Docker's classic
// builder: the builder's own words for the line it was running.
type stepWriter struct {
	line []byte // the line being written, at most stepMax bytes
	last string
}

const stepMax = 512

func (w *stepWriter) Write(p []byte) (int, error) {
	for _, c := range p {
		if c == '\n' {
			if l := strings.TrimSpace(string(w.line)); strings.HasPrefix(l, "Step ") {
				w.last = l
			}
			w.line = w.line[:0]
			continue
		}
		if len(w.line) < stepMax {
			w.line = append(w.line, c)
		}
	}
	return len(p), nil
}
