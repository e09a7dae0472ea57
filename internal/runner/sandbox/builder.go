package sandbox

import (
	"bytes"
	"context"
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
)

// Builder is a Docker daemon of the runner's own that builds pull
// requests' images. It runs in a network namespace of its own holding
// only a loopback interface, so neither it nor anything it starts has a
// route anywhere: `ADD <url>`, a FROM or COPY --from image it lacks, a
// remote context, ONBUILD triggers — whatever a Dockerfile's bytes say,
// a connection fails inside the builder, and a listener on the host's
// loopback or on the Docker bridge is out of reach (its loopback is its
// own). It has no bridge, no iptables rules, no registry credentials (the
// CLI that talks to it gets an empty DOCKER_CONFIG), its own data root,
// exec root and socket, and an image store holding only the base images
// the agent copied into it from the host's daemon by ID (Load).
type Builder struct {
	// Host is the DOCKER_HOST of the builder: unix://…/docker.sock.
	Host string
	// Docker is the CLI used to talk to both daemons.
	Docker string

	cmd       *exec.Cmd
	execDir   string // the daemon's exec root; removed on Close
	configDir string // the CLI's empty DOCKER_CONFIG
	done      chan struct{}
	waitErr   error
}

// BuilderConfig says where a Builder keeps its state.
type BuilderConfig struct {
	// Dir holds the builder's image store and its log; it persists, so
	// the base images loaded once stay.
	Dir string
	// Dockerd and Docker are the daemon and CLI binaries ("dockerd",
	// "docker" when empty).
	Dockerd, Docker string
	// ExecDir is the daemon's exec root, where its socket is (a short
	// path: socket paths stop at 108 bytes); a fresh temporary directory
	// when empty. Close removes it.
	ExecDir string
	// Socket is where the daemon listens (EXEC-DIR/docker.sock when
	// empty); it belongs to the docker group, as the host daemon's does.
	Socket string
	Log    zerolog.Logger
}

// StartBuilder starts a builder daemon in a new network namespace and
// waits until it answers. It needs root (a daemon and a namespace).
func StartBuilder(ctx context.Context, cfg BuilderConfig) (*Builder, error) {
	if cfg.Dockerd == "" {
		cfg.Dockerd = "dockerd"
	}
	if cfg.Docker == "" {
		cfg.Docker = "docker"
	}
	dockerd, err := exec.LookPath(cfg.Dockerd)
	if err != nil {
		return nil, fmt.Errorf("sealed builder: %w (install Docker's daemon, e.g. Debian's docker.io)", err)
	}
	data := filepath.Join(cfg.Dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, fmt.Errorf("sealed builder: %w", err)
	}
	// The exec root holds sockets, whose paths must stay under 108 bytes.
	execDir := cfg.ExecDir
	if execDir == "" {
		execDir, err = os.MkdirTemp("", "pgb-")
	} else {
		err = os.MkdirAll(execDir, 0o700)
	}
	if err != nil {
		return nil, fmt.Errorf("sealed builder: %w", err)
	}
	conf := filepath.Join(execDir, "daemon.json")
	// An empty config: nothing of the host's /etc/docker/daemon.json
	// (registry mirrors, proxies, hosts) applies to the builder.
	if err := os.WriteFile(conf, []byte("{}\n"), 0o600); err != nil {
		return nil, fmt.Errorf("sealed builder: %w", err)
	}
	logf, err := os.OpenFile(filepath.Join(cfg.Dir, "dockerd.log"), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sealed builder log: %w", err)
	}
	sock := cfg.Socket
	if sock == "" {
		sock = filepath.Join(execDir, "docker.sock")
	}
	args := []string{
		"--data-root", data,
		"--exec-root", execDir,
		"--pidfile", filepath.Join(execDir, "docker.pid"),
		"--config-file", conf,
		"-H", "unix://" + sock,
		"--bridge=none", "--iptables=false", "--ip-masq=false", "--ip-forward=false", "--userland-proxy=false",
		"--containerd-namespace", "perfgate-builder",
		"--containerd-plugins-namespace", "perfgate-builder-plugins",
		"--cgroup-parent", "perfgate-builder",
		"--no-new-privileges",
		"--log-level", "warn",
	}
	// The shell only brings the namespace's loopback up, then becomes the
	// daemon; CLONE_NEWNET gives it a namespace with that interface only.
	cmd := exec.Command("sh", append([]string{"-c", `ip link set lo up && exec "$0" "$@"`, dockerd}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")} // no proxies, no credentials
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		os.RemoveAll(execDir)
		return nil, fmt.Errorf("sealed builder: start dockerd in a new network namespace: %w", err)
	}
	b := &Builder{Host: "unix://" + sock, Docker: cfg.Docker, cmd: cmd, execDir: execDir, configDir: filepath.Join(execDir, "cli"), done: make(chan struct{})}
	if err := os.Mkdir(b.configDir, 0o700); err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("sealed builder: %w", err)
	}
	go func() {
		b.waitErr = cmd.Wait()
		logf.Close()
		close(b.done)
	}()
	if err := b.waitReady(ctx, sock); err != nil {
		tail, _ := os.ReadFile(filepath.Join(cfg.Dir, "dockerd.log"))
		_ = b.Close()
		return nil, fmt.Errorf("sealed builder: %w; dockerd said: %s", err, lastBytes(tail, 1024))
	}
	ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid))
	own, _ := os.Readlink("/proc/self/ns/net")
	if ns == "" || ns == own {
		_ = b.Close()
		return nil, fmt.Errorf("sealed builder: dockerd runs in the agent's network namespace (%s), not its own", own)
	}
	cfg.Log.Info().Str("host", b.Host).Int("pid", cmd.Process.Pid).Str("netns", ns).Str("data_root", data).
		Msg("sealed builder started: its own network namespace, loopback only")
	return b, nil
}

// AttachBuilder talks to a sealed builder someone else started (an agent
// in a container is handed the socket of one started on the host by
// `perfgate build-daemon`): host is its DOCKER_HOST.
func AttachBuilder(ctx context.Context, host, docker string) (*Builder, error) {
	if docker == "" {
		docker = "docker"
	}
	dir, err := os.MkdirTemp("", "pgb-cli-")
	if err != nil {
		return nil, fmt.Errorf("sealed builder: %w", err)
	}
	b := &Builder{Host: host, Docker: docker, configDir: dir}
	if err := b.docker(ctx, nil, nil, "version", "--format", "{{.Server.Version}}"); err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("sealed builder at %s: %w", host, err)
	}
	return b, nil
}

// waitReady waits until the daemon answers on sock, or exits.
func (b *Builder) waitReady(ctx context.Context, sock string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(sock); err == nil {
			if err := b.docker(ctx, nil, nil, "version", "--format", "{{.Server.Version}}"); err == nil {
				return nil
			}
		}
		select {
		case <-b.done:
			if b.waitErr == nil {
				return errors.New("dockerd exited")
			}
			return fmt.Errorf("dockerd exited: %w", b.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("dockerd did not answer on %s: %w", sock, ctx.Err())
		case <-tick.C:
		}
	}
}

// Close stops the daemon (SIGTERM, then SIGKILL after 20 s) and removes
// its exec root; the image store stays.
func (b *Builder) Close() error {
	if b == nil {
		return nil
	}
	if b.cmd == nil || b.cmd.Process == nil {
		return os.RemoveAll(b.configDir)
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-b.done
	}
	// The daemon's own containerd is its child, in its process group.
	_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
	return os.RemoveAll(b.execDir)
}

// Env is the environment of a `docker` CLI that builds in the builder:
// DOCKER_HOST at its socket, an empty DOCKER_CONFIG (no registry
// credentials), the classic builder; whatever env said of those is
// dropped.
func (b *Builder) Env(env []string) []string {
	out := make([]string, 0, len(env)+3)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "DOCKER_HOST", "DOCKER_CONFIG", "DOCKER_CONTEXT", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY", "DOCKER_BUILDKIT":
			continue
		}
		out = append(out, kv)
	}
	return append(out, "DOCKER_HOST="+b.Host, "DOCKER_CONFIG="+b.configDir, "DOCKER_BUILDKIT=0")
}

// Load copies the host daemon's image ref into the builder by ID and tags
// it ref there, so a FROM of ref resolves to exactly what the host holds
// now. ok is false when the host has no such image.
func (b *Builder) Load(ctx context.Context, ref string) (id string, ok bool, err error) {
	var out bytes.Buffer
	if err := b.hostDocker(ctx, nil, &out, "image", "inspect", "--format", "{{.Id}}", ref); err != nil {
		if strings.Contains(strings.ToLower(out.String()), "no such") {
			return "", false, nil
		}
		return "", false, fmt.Errorf("inspect %s on the host: %w: %s", ref, err, lastBytes(out.Bytes(), 512))
	}
	id = strings.TrimSpace(out.String())
	if err := b.docker(ctx, nil, nil, "image", "inspect", id); err != nil {
		if err := b.copyImage(ctx, id, false); err != nil {
			return "", false, fmt.Errorf("copy %s (%s) into the builder: %w", ref, id, err)
		}
	}
	// A digest names an image ID the daemon resolves without a tag.
	if ref != id && !strings.HasPrefix(ref, "sha256:") && !strings.Contains(ref, "@") {
		if err := b.docker(ctx, nil, nil, "tag", id, ref); err != nil {
			return "", false, fmt.Errorf("tag %s as %s in the builder: %w", id, ref, err)
		}
	}
	return id, true, nil
}

// Export copies the builder's image ref (with its tag) to the host's
// daemon, where engines run it by ID.
func (b *Builder) Export(ctx context.Context, ref string) error {
	if err := b.copyImage(ctx, ref, true); err != nil {
		return fmt.Errorf("copy %s from the builder to the host: %w", ref, err)
	}
	return nil
}

// copyImage pipes `docker save ref` of one daemon into `docker load` of
// the other: host to builder, or builder to host when out.
func (b *Builder) copyImage(ctx context.Context, ref string, out bool) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	save := exec.CommandContext(ctx, b.Docker, "save", ref)
	load := exec.CommandContext(ctx, b.Docker, "load", "--quiet")
	save.Env, load.Env = os.Environ(), b.Env(os.Environ())
	if out {
		save.Env, load.Env = load.Env, save.Env
	}
	pr, pw := io.Pipe()
	var saveErr, loadErr bytes.Buffer
	save.Stdout, save.Stderr = pw, &saveErr
	load.Stdin, load.Stderr, load.Stdout = pr, &loadErr, io.Discard
	if err := load.Start(); err != nil {
		return fmt.Errorf("docker load: %w", err)
	}
	err := save.Run()
	pw.CloseWithError(err)
	lerr := load.Wait()
	if err != nil {
		return fmt.Errorf("docker save: %w: %s", err, lastBytes(saveErr.Bytes(), 512))
	}
	if lerr != nil {
		return fmt.Errorf("docker load: %w: %s", lerr, lastBytes(loadErr.Bytes(), 512))
	}
	return nil
}

// docker runs the CLI against the builder; hostDocker against the host.
func (b *Builder) docker(ctx context.Context, stdin io.Reader, out io.Writer, args ...string) error {
	return b.run(ctx, b.Env(os.Environ()), stdin, out, args...)
}

func (b *Builder) hostDocker(ctx context.Context, stdin io.Reader, out io.Writer, args ...string) error {
	return b.run(ctx, os.Environ(), stdin, out, args...)
}

func (b *Builder) run(ctx context.Context, env []string, stdin io.Reader, out io.Writer, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.Docker, args...)
	cmd.Env, cmd.Stdin = env, stdin
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	if out != nil {
		_, _ = out.Write(buf.Bytes())
	}
	if err != nil {
		return fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, lastBytes(buf.Bytes(), 512))
	}
	return nil
}

func lastBytes(b []byte, n int) string {
	b = bytes.TrimSpace(b)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// Remove untags ref in the builder, once the host has it.
func (b *Builder) Remove(ctx context.Context, ref string) error {
	return b.docker(ctx, nil, nil, "image", "rm", ref)
}
