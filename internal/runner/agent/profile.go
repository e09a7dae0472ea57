package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/template"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/runner/bench"
	"github.com/perfgate/perfgate/internal/runner/engine"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
)

// ProfilerDirEnv is where an engine started for a profiling pass writes
// its traces (engine.ProfilerDirEnv).
const ProfilerDirEnv = engine.ProfilerDirEnv

// profileJob runs a profiling pass: for each side, base first, the engine
// from the commit's checkout with its profiler on, the warm-up, then
// plan.Profile.Requests requests between /start_profile and /stop_profile
// (or under profile.command), and the trace files uploaded as the job's
// artifacts. One engine holds the card at a time.
func (a *Agent) profileJob(ctx context.Context, c *agentapi.ClaimResponse, plan agentapi.Plan, uuid string, log zerolog.Logger) outcome {
	pp := plan.Profile
	for _, name := range plan.ProfileSides() {
		files, err := a.profileSide(ctx, c, plan, name, uuid, log)
		if err != nil {
			if ctx.Err() != nil {
				return outcome{jobstate.Failed, ctx.Err().Error()}
			}
			return outcome{jobstate.Failed, fmt.Sprintf("profile %s: %v", describeSide(name, plan.Commit(name)), err)}
		}
		if len(files.paths) == 0 {
			files.cleanup()
			return outcome{jobstate.Failed, fmt.Sprintf("profile %s: the engine left no trace file (is its profiler on? vLLM needs %s; a profile.command must write under {{.Out}})",
				describeSide(name, plan.Commit(name)), ProfilerDirEnv)}
		}
		err = a.uploadTraces(ctx, c, name, files.paths, pp.MaxBytes, log)
		files.cleanup()
		if err != nil {
			if errors.Is(err, agentapi.ErrLeaseLost) || ctx.Err() != nil {
				return outcome{jobstate.Failed, err.Error()}
			}
			return outcome{jobstate.Failed, fmt.Sprintf("profile %s: %v", describeSide(name, plan.Commit(name)), err)}
		}
	}
	return outcome{jobstate.Succeeded, ""}
}

// traceFiles are one side's traces in a directory removed afterwards.
type traceFiles struct {
	dir   string
	paths []string
}

func (t traceFiles) cleanup() {
	if t.dir != "" {
		os.RemoveAll(t.dir)
	}
}

// profileSide profiles one commit and returns its trace files.
func (a *Agent) profileSide(ctx context.Context, c *agentapi.ClaimResponse, plan agentapi.Plan, name, uuid string, log zerolog.Logger) (traceFiles, error) {
	s, err := a.prepare(ctx, c, plan, name, uuid, log)
	if err != nil {
		return traceFiles{}, err
	}
	defer s.release()
	dir, err := os.MkdirTemp(a.cfg.WorkDir, "perfgate-profile-")
	if err != nil {
		return traceFiles{}, fmt.Errorf("profile directory: %w", err)
	}
	out := traceFiles{dir: dir}
	if plan.Engine.Image != "" {
		// The container's user is not the agent's: let it write there.
		if err := os.Chmod(dir, 0o777); err != nil {
			out.cleanup()
			return traceFiles{}, fmt.Errorf("profile directory: %w", err)
		}
	}
	s.profileDir = dir
	log.Info().Str("side", name).Str("sha", s.sha).Str("dir", dir).Msg("starting the engine of " + describeSide(name, s.sha) + " with its profiler on")
	cur, err := a.startEngine(ctx, c, plan, s, uuid, log)
	if err != nil {
		out.cleanup()
		return traceFiles{}, err
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
		defer cancel()
		if err := cur.Stop(sctx); err != nil {
			log.Error().Err(err).Msg("stop engine")
		}
	}
	defer stop()
	if plan.Warmup > 0 {
		w := a.benchOptions(plan, cur.BaseURL(), c, s)
		w.NumPrompts, w.Seed = plan.Warmup, w.Seed+1
		log.Info().Int("requests", plan.Warmup).Msg("warm-up")
		if _, err := bench.Run(ctx, w); err != nil {
			out.cleanup()
			return traceFiles{}, fmt.Errorf("warm-up: %w", err)
		}
	}
	timeout := plan.Profile.Timeout.D()
	if timeout <= 0 {
		timeout = config.DefaultProfileTimeout
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	load := a.benchOptions(plan, cur.BaseURL(), c, s)
	load.NumPrompts = plan.Profile.Requests
	load.RunID = fmt.Sprintf("job%d-a%d-profile-%s", c.JobID, c.Attempt, name)
	load.CacheSalt = load.RunID
	if len(plan.Profile.Command) > 0 {
		err = a.profileWithCommand(pctx, plan, cur, s, dir, load, log)
	} else {
		err = profileWithEndpoints(pctx, cur.BaseURL(), dir, load, log)
	}
	// The engine writes its traces as it stops (vLLM flushes on
	// /stop_profile, some profilers at exit): stop it before collecting.
	stop()
	if err != nil {
		out.cleanup()
		return traceFiles{}, err
	}
	out.paths, err = listFiles(dir)
	if err != nil {
		out.cleanup()
		return traceFiles{}, err
	}
	log.Info().Str("side", name).Int("files", len(out.paths)).Msg("profile taken")
	return out, nil
}

// profileWithEndpoints records the load between POST /start_profile and
// POST /stop_profile. An engine that answers /stop_profile with the
// trace (perfgate sim without a profile directory) and writes no file
// has its answer kept as the trace.
func profileWithEndpoints(ctx context.Context, base, dir string, load bench.Options, log zerolog.Logger) error {
	if _, err := post(ctx, base+"/start_profile"); err != nil {
		return fmt.Errorf("start the engine's profiler: %w (start vLLM with %s set, or set profile.command)", err, ProfilerDirEnv)
	}
	log.Info().Int("requests", load.NumPrompts).Msg("profiled load")
	_, loadErr := bench.Run(ctx, load)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	body, err := post(sctx, base+"/stop_profile")
	if loadErr != nil {
		return fmt.Errorf("profiled load: %w", loadErr)
	}
	if err != nil {
		return fmt.Errorf("stop the engine's profiler: %w", err)
	}
	if files, _ := listFiles(dir); len(files) == 0 && bytes.Contains(body, []byte(`"traceEvents"`)) && json.Valid(body) {
		return os.WriteFile(filepath.Join(dir, "stop_profile.trace.json"), body, 0o600)
	}
	return nil
}

// profileWithCommand runs profile.command alongside the load and waits
// for it; one still running 30 s after the load gets SIGINT (nsys and
// perf write their files on it), then is killed at the timeout.
func (a *Agent) profileWithCommand(ctx context.Context, plan agentapi.Plan, cur *running, s *side, dir string, load bench.Options, log zerolog.Logger) error {
	data := profileData{Out: dir, URL: cur.BaseURL(), SHA: s.sha, Workdir: s.workdir(), Seconds: int(plan.Profile.Timeout.D().Seconds())}
	if cur.proc != nil {
		data.PID, data.Port = cur.proc.PID(), cur.proc.Port()
	} else if u, err := url.Parse(cur.BaseURL()); err == nil {
		data.Port, _ = strconv.Atoi(u.Port())
	}
	argv := make([]string, len(plan.Profile.Command))
	for i, elem := range plan.Profile.Command {
		t, err := template.New("profile").Option("missingkey=error").Parse(elem)
		if err != nil {
			return fmt.Errorf("profile.command[%d]: %w", i, err)
		}
		var b strings.Builder
		if err := t.Execute(&b, data); err != nil {
			return fmt.Errorf("profile.command[%d]: %w", i, err)
		}
		argv[i] = b.String()
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = engineLogWriter{log}, engineLogWriter{log}
	cmd.WaitDelay = 10 * time.Second
	log.Info().Strs("argv", argv).Msg("profile command")
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start profile.command: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	_, loadErr := bench.Run(ctx, load)
	var werr error
	select {
	case werr = <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Signal(syscall.SIGINT)
		werr = <-done
	}
	if loadErr != nil {
		return fmt.Errorf("profiled load: %w", loadErr)
	}
	if werr != nil && ctx.Err() != nil {
		return fmt.Errorf("profile.command did not finish within profile.timeout: %w", werr)
	}
	if werr != nil {
		log.Warn().Err(werr).Msg("profile.command exited with an error; uploading what it wrote")
	}
	return nil
}

// profileData fills profile.command (config.ProfilePlaceholders).
type profileData struct {
	Out, URL, SHA, Workdir string
	PID, Port, Seconds     int
}

// uploadTraces uploads a side's files; one over the plan's cap fails the
// pass with the file and the cap named.
func (a *Agent) uploadTraces(ctx context.Context, c *agentapi.ClaimResponse, side string, paths []string, maxBytes int64, log zerolog.Logger) error {
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		name := safeName(filepath.Base(p))
		if maxBytes > 0 && st.Size() > maxBytes {
			return fmt.Errorf("trace %s is %d bytes, over profile.max_bytes (%d): profile fewer requests (profile.requests) or raise the cap", name, st.Size(), maxBytes)
		}
		resp, err := a.client.PutArtifact(ctx, c.JobID, c.LeaseID, side, p, name)
		if err != nil {
			return err
		}
		log.Info().Str("side", side).Str("name", name).Int64("bytes", resp.Size).Int64("artifact_id", resp.ArtifactID).Msg("trace uploaded")
	}
	return nil
}

// listFiles lists the regular files under dir, sorted.
func listFiles(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			out = append(out, p)
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

// safeName makes a file name the artifact API accepts.
func safeName(n string) string {
	b := []byte(n)
	for i, ch := range b {
		ok := ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '.' || ch == '_' || ch == '+' || ch == '-'
		if !ok {
			b[i] = '_'
		}
	}
	s := strings.TrimLeft(string(b), "._-+")
	if s == "" {
		s = "trace"
	}
	if len(s) > 200 {
		s = s[len(s)-200:]
	}
	return s
}

// post sends an empty POST and returns the answer's body (up to 512 MiB);
// a non-2xx answer is an error.
func post(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 512<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("POST %s answered %d: %s", u, resp.StatusCode, strings.TrimSpace(string(body[:min(len(body), 300)])))
	}
	return body, nil
}
