package engine

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/runner/sandbox"
)

// stopContainer stops the job's container by name: `docker stop` gives the
// engine StopGrace to exit, `docker rm -f` makes sure it is gone (with
// --rm it usually is already). The `docker run` client then exits; if it
// does not, its process group is killed.
func (s *Server) stopContainer(ctx context.Context) error {
	name := ContainerName(s.spec.JobID)
	grace := int(s.spec.StopGrace.Round(time.Second) / time.Second)
	var errs []error
	if out, err := s.docker(ctx, s.spec.StopGrace+15*time.Second, "stop", "--time", strconv.Itoa(grace), name); err != nil && !noSuchContainer(out) {
		errs = append(errs, fmt.Errorf("docker stop %s: %w: %s", name, err, trimOutput(out)))
	}
	if out, err := s.docker(ctx, 30*time.Second, "rm", "-f", name); err != nil && !noSuchContainer(out) {
		errs = append(errs, fmt.Errorf("docker rm -f %s: %w: %s", name, err, trimOutput(out)))
	}
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		signalGroup(s.cmd.Process.Pid, true)
		<-s.exited
	}
	if s.net != nil {
		if err := s.net.Remove(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	// The container is what holds the GPU; the client's fate matters only
	// if the container could not be removed.
	return errors.Join(errs...)
}

// ResolveImage verifies a pinned image on the daemon before a run and
// returns the local image ID to run:
//   - sha256:<id>, a local image's ID (a build's, a `docker load`ed one):
//     it must exist;
//   - name@sha256:<digest> that the daemon knows by that repository digest
//     (pulled from a registry): its ID;
//   - name[:tag]@sha256:<id> where <id> is the ID `docker image inspect
//     name[:tag]` shows (an image built or loaded on an air-gapped runner
//     has no repository digest): the tag must still point at that ID, else
//     the run is refused (the tag moved).
//
// An image the daemon does not have is returned as named, for `docker run`
// to pull by its digest.
func ResolveImage(ctx context.Context, dockerBinary, image string) (string, error) {
	if dockerBinary == "" {
		dockerBinary = "docker"
	}
	inspect := func(ref string) (string, bool, error) {
		out, err := runDocker(ctx, dockerBinary, 30*time.Second, "image", "inspect", "--format", "{{.Id}}", ref)
		if err != nil {
			if strings.Contains(strings.ToLower(string(out)), "no such image") {
				return "", false, nil
			}
			return "", false, fmt.Errorf("docker image inspect %s: %w: %s", ref, err, trimOutput(out))
		}
		return strings.TrimSpace(string(out)), true, nil
	}
	if strings.HasPrefix(image, "sha256:") {
		id, ok, err := inspect(image)
		if err != nil {
			return "", err
		}
		if !ok || id != image {
			return "", fmt.Errorf("image %s is not on this runner: a local image ID names an image built or loaded here (docker load, docker build)", image)
		}
		return id, nil
	}
	id, ok, err := inspect(image)
	if err != nil {
		return "", err
	}
	if ok {
		return id, nil
	}
	name, pin, _ := strings.Cut(image, "@")
	id, ok, err = inspect(name)
	if err != nil || !ok {
		return image, err // not here: docker run pulls it by digest
	}
	if id != pin {
		return "", fmt.Errorf("image %s: %s is now image %s, not the pinned %s (the tag moved); pin the image you mean: %s@%s", image, name, id, pin, name, id)
	}
	return id, nil
}

// containerPID is the host PID of the container's init process, so the GPU
// sampler can tell the engine's processes from foreign ones.
func (s *Server) containerPID(ctx context.Context) int {
	out, err := s.docker(ctx, 10*time.Second, "inspect", "--format", "{{.State.Pid}}", ContainerName(s.spec.JobID))
	pid, perr := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || perr != nil || pid <= 0 {
		s.log.Warn().Err(err).Str("output", trimOutput(out)).Msg("docker inspect: container PID unknown; its GPU processes will count as foreign")
		return 0
	}
	return pid
}

func (s *Server) docker(ctx context.Context, timeout time.Duration, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.spec.DockerBinary, args...)
	cmd.Env = s.spec.dockerEnv()
	return cmd.CombinedOutput()
}

// RemoveLeftovers removes every container labelled as a perfgate engine
// (and relay) that agent made, then their sandbox networks: after an agent
// crash they may still hold a GPU. Call it when the agent starts, before
// the first job. It returns how many containers it removed.
func RemoveLeftovers(ctx context.Context, dockerBinary, agent string, log zerolog.Logger) (int, error) {
	if dockerBinary == "" {
		dockerBinary = "docker"
	}
	out, err := runDocker(ctx, dockerBinary, 30*time.Second, "ps", "-aq", "--filter", "label="+JobLabel, "--filter", "label="+sandbox.AgentLabel+"="+agent)
	if err != nil {
		return 0, fmt.Errorf("list leftover engine containers: %w: %s", err, trimOutput(out))
	}
	ids := strings.Fields(string(out))
	if len(ids) > 0 {
		log.Warn().Strs("containers", ids).Msg("removing engine containers left by an earlier agent")
		if out, err := runDocker(ctx, dockerBinary, 60*time.Second, append([]string{"rm", "-f"}, ids...)...); err != nil {
			return 0, fmt.Errorf("remove leftover engine containers: %w: %s", err, trimOutput(out))
		}
	}
	// Their sandbox networks, once no container uses them.
	nets, err := sandbox.RemoveLeftovers(ctx, dockerBinary, agent)
	if err != nil {
		return len(ids), err
	}
	if nets > 0 {
		log.Warn().Int("networks", nets).Msg("removed sandbox networks left by an earlier agent")
	}
	return len(ids), nil
}

func runDocker(ctx context.Context, bin string, timeout time.Duration, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return exec.CommandContext(ctx, bin, args...).CombinedOutput()
}

// noSuchContainer: the container is gone or going (docker stop of a --rm
// container removes it while rm -f asks).
func noSuchContainer(out []byte) bool {
	s := strings.ToLower(string(out))
	return strings.Contains(s, "no such container") || strings.Contains(s, "is already in progress")
}
