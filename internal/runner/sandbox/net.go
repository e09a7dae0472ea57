package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// RelayPort is where the relay listens inside its container.
const RelayPort = 8000

// Net is one job's sandbox network: an internal bridge with no address on
// the host, which the engine container joins alone, and once the engine
// runs, the relay that publishes its port on 127.0.0.1.
type Net struct {
	Docker string // the docker binary
	Name   string // the network's (and, with "-relay", the relay's) name
	Job    string // the Label value
	Agent  string // the AgentLabel value
	// RelayImage is the relay's image (EnsureRelayImage).
	RelayImage string
	relayUp    bool
}

// Create makes the network. It can reach nothing: --internal gives it no
// route out, and inhibit_ipv4 gives the host no address on its bridge, so
// not even the host's own services answer.
func (n *Net) Create(ctx context.Context) error {
	out, err := docker(ctx, n.Docker, 30*time.Second, "network", "create", "--driver", "bridge", "--internal",
		"--opt", "com.docker.network.bridge.inhibit_ipv4=true", "--label", Label+"="+n.Job, "--label", AgentLabel+"="+n.Agent, n.Name)
	if err != nil {
		return fmt.Errorf("create sandbox network %s: %w: %s", n.Name, err, trim(out))
	}
	return nil
}

// EngineAddr waits until the container is running on the network and
// returns its address there; it gives up when exited is closed or ctx ends.
func (n *Net) EngineAddr(ctx context.Context, container string, exited <-chan struct{}) (string, error) {
	format := `{{with index .NetworkSettings.Networks "` + n.Name + `"}}{{.IPAddress}}{{end}}`
	wait := 20 * time.Millisecond
	var last string
	for {
		out, err := docker(ctx, n.Docker, 10*time.Second, "inspect", "--format", format, container)
		ip := strings.TrimSpace(string(out))
		if err == nil && net.ParseIP(ip) != nil {
			return ip, nil
		}
		last = trim(out)
		select {
		case <-exited:
			return "", errors.New("the engine container exited before it joined its network")
		case <-ctx.Done():
			return "", fmt.Errorf("engine container address: %w (last: %s)", ctx.Err(), last)
		case <-time.After(wait):
		}
		wait = min(wait*2, 500*time.Millisecond)
	}
}

// StartRelay publishes engine:port on 127.0.0.1:hostPort through the
// relay container, itself contained like an engine.
func (n *Net) StartRelay(ctx context.Context, engineIP string, port, hostPort int) error {
	if n.RelayImage == "" {
		return errors.New("no relay image: the agent could not build one (see its start-up log)")
	}
	name := n.Name + "-relay"
	out, err := docker(ctx, n.Docker, time.Minute, "run", "--detach", "--rm",
		"--name", name, "--label", Label+"="+n.Job, "--label", AgentLabel+"="+n.Agent,
		"--network", "bridge", "--publish", fmt.Sprintf("127.0.0.1:%d:%d", hostPort, RelayPort),
		"--read-only", "--user", DefaultUser, "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--pids-limit", "256", "--memory", "512m",
		n.RelayImage, "--listen", ":"+strconv.Itoa(RelayPort), "--to", net.JoinHostPort(engineIP, strconv.Itoa(port)))
	if err != nil {
		// A relay that could not start may still exist, created.
		_, _ = docker(context.WithoutCancel(ctx), n.Docker, 30*time.Second, "rm", "--force", name)
		return fmt.Errorf("start the relay of %s: %w: %s", n.Name, err, trim(out))
	}
	n.relayUp = true
	if out, err := docker(ctx, n.Docker, 30*time.Second, "network", "connect", n.Name, name); err != nil {
		return fmt.Errorf("connect the relay to %s: %w: %s", n.Name, err, trim(out))
	}
	return nil
}

// Remove takes the relay and the network down; safe to call twice and
// after a failed Create.
func (n *Net) Remove(ctx context.Context) error {
	var errs []error
	if n.relayUp {
		if out, err := docker(ctx, n.Docker, 30*time.Second, "rm", "--force", n.Name+"-relay"); err != nil && !missing(out) {
			errs = append(errs, fmt.Errorf("remove relay %s-relay: %w: %s", n.Name, err, trim(out)))
		}
		n.relayUp = false
	}
	// The engine container may still be going away: a network in use
	// cannot be removed, so wait a little for it.
	for try := 0; ; try++ {
		out, err := docker(ctx, n.Docker, 30*time.Second, "network", "rm", n.Name)
		if err == nil || missing(out) {
			break
		}
		if try == 20 || ctx.Err() != nil {
			errs = append(errs, fmt.Errorf("remove sandbox network %s: %w: %s", n.Name, err, trim(out)))
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	return errors.Join(errs...)
}

// RemoveLeftovers removes the networks an earlier run of agent left (the
// containers are the engine package's to remove first).
func RemoveLeftovers(ctx context.Context, dockerBin, agent string) (int, error) {
	out, err := docker(ctx, dockerBin, 30*time.Second, "network", "ls", "--quiet", "--filter", "label="+Label, "--filter", "label="+AgentLabel+"="+agent)
	if err != nil {
		return 0, fmt.Errorf("list leftover sandbox networks: %w: %s", err, trim(out))
	}
	ids := strings.Fields(string(out))
	if len(ids) == 0 {
		return 0, nil
	}
	if out, err := docker(ctx, dockerBin, time.Minute, append([]string{"network", "rm"}, ids...)...); err != nil {
		return 0, fmt.Errorf("remove leftover sandbox networks: %w: %s", err, trim(out))
	}
	return len(ids), nil
}

func docker(ctx context.Context, bin string, timeout time.Duration, args ...string) ([]byte, error) {
	if bin == "" {
		bin = "docker"
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return exec.CommandContext(ctx, bin, args...).CombinedOutput()
}

func missing(out []byte) bool {
	s := strings.ToLower(string(out))
	return strings.Contains(s, "no such") || strings.Contains(s, "not found")
}

func trim(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}
