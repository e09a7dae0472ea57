package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/analysis/capacity"
	"github.com/perfgate/perfgate/internal/analysis/soak"
	"github.com/perfgate/perfgate/internal/runner/bench"
	"github.com/perfgate/perfgate/internal/runner/gpu"
	"github.com/perfgate/perfgate/internal/runner/sweep"
	"github.com/perfgate/perfgate/internal/runner/watch"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
)

// capacityJob runs a capacity plan: each sweep, in the plan's ABBA order,
// starts its commit's engine fresh, sends the warm-up, sweeps the rate to
// the knee (internal/runner/sweep) and uploads the sweep as an artifact
// (capacity-<n>.json, side base or head). The server compares the knees.
func (a *Agent) capacityJob(ctx context.Context, c *agentapi.ClaimResponse, plan agentapi.Plan, uuid string, log zerolog.Logger) outcome {
	cp := plan.Capacity
	if cp.Steps && plan.BaseSHA != "" && plan.BaseSHA != plan.HeadSHA {
		return a.capacitySteps(ctx, c, plan, uuid, log)
	}
	for i, name := range plan.CapacitySides() {
		s, err := a.prepare(ctx, c, plan, name, uuid, log)
		if err != nil {
			return failed(ctx, fmt.Sprintf("capacity sweep %d (%s)", i+1, describeSide(name, plan.Commit(name))), err)
		}
		sw, err := capacity.NewSweep(cp.Sweep, cp.SLO)
		if err != nil {
			s.release()
			return outcome{jobstate.Failed, fmt.Sprintf("capacity plan: %v", err)}
		}
		err = a.withEngine(ctx, c, plan, s, uuid, log, func(url string) error {
			o := sweep.Options{Bench: a.benchOptions(plan, url, c, s), Arrivals: cp.Arrivals,
				StepSeconds: cp.StepSeconds, MinPrompts: cp.MinPrompts, Log: log.With().Str("side", name).Logger()}
			_, err := sweep.Run(ctx, sw, o)
			return err
		})
		s.release()
		if err != nil {
			return failed(ctx, fmt.Sprintf("capacity sweep %d (%s)", i+1, describeSide(name, plan.Commit(name))), err)
		}
		if err := a.uploadSweep(ctx, c, plan, name, i+1, sw, log); err != nil {
			return failed(ctx, "upload capacity sweep", err)
		}
	}
	return outcome{jobstate.Succeeded, ""}
}

// capacitySteps runs a capacity plan rate by rate: for each repeat, both
// commits' engines are started from their checkouts and stay up, and the
// two sweeps advance in lockstep, the side going first alternating by step
// (B H | H B | B H …), so a host that slows down mid-sweep slows both sides
// alike instead of one whole sweep. Each sweep is uploaded as with whole
// sweeps (capacity-<n>.json, side base or head).
func (a *Agent) capacitySteps(ctx context.Context, c *agentapi.ClaimResponse, plan agentapi.Plan, uuid string, log zerolog.Logger) outcome {
	cp := plan.Capacity
	repeats := max(cp.Sweeps, 1)
	n := 0
	for r := range repeats {
		sides := map[string]*side{}
		release := func() {
			for _, s := range sides {
				s.release()
			}
		}
		for _, name := range []string{agentapi.SideBase, agentapi.SideHead} {
			s, err := a.prepare(ctx, c, plan, name, uuid, log)
			if err != nil {
				release()
				return failed(ctx, fmt.Sprintf("capacity repeat %d (%s)", r+1, describeSide(name, plan.Commit(name))), err)
			}
			sides[name] = s
		}
		sweeps := map[string]*capacity.Sweep{}
		for _, name := range []string{agentapi.SideBase, agentapi.SideHead} {
			sw, err := capacity.NewSweep(cp.Sweep, cp.SLO)
			if err != nil {
				release()
				return outcome{jobstate.Failed, fmt.Sprintf("capacity plan: %v", err)}
			}
			sweeps[name] = sw
		}
		err := a.withEngine(ctx, c, plan, sides[agentapi.SideBase], uuid, log, func(baseURL string) error {
			return a.withEngine(ctx, c, plan, sides[agentapi.SideHead], uuid, log, func(headURL string) error {
				urls := map[string]string{agentapi.SideBase: baseURL, agentapi.SideHead: headURL}
				return lockstep(ctx, sweeps, func(name string, rate float64) (capacity.Step, error) {
					o := sweep.Options{Bench: a.benchOptions(plan, urls[name], c, sides[name]), Arrivals: cp.Arrivals,
						StepSeconds: cp.StepSeconds, MinPrompts: cp.MinPrompts, Log: log.With().Str("side", name).Logger()}
					st, err := sweep.Step(ctx, rate, sweeps[name].SLO, o)
					if err == nil {
						o.Log.Info().Float64("rate", rate).Int("sent", st.Sent).Int("good", st.Good).Float64("ttft_p99_ms", st.TTFTp99ms).
							Str("distorted", st.Distorted).Msg("capacity step")
					}
					return st, err
				})
			})
		})
		release()
		if err != nil {
			return failed(ctx, fmt.Sprintf("capacity repeat %d, interleaved by step", r+1), err)
		}
		order := []string{agentapi.SideBase, agentapi.SideHead}
		if r%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, name := range order {
			n++
			if err := a.uploadSweep(ctx, c, plan, name, n, sweeps[name], log); err != nil {
				return failed(ctx, "upload capacity sweep", err)
			}
		}
	}
	return outcome{jobstate.Succeeded, ""}
}

// uploadSweep uploads a finished sweep as capacity-<n>.json.
func (a *Agent) uploadSweep(ctx context.Context, c *agentapi.ClaimResponse, plan agentapi.Plan, side string, n int, sw *capacity.Sweep, log zerolog.Logger) error {
	k := sw.Knee()
	log.Info().Str("side", side).Float64("knee", k.Rate).Float64("below", k.Below).Int("steps", k.Steps).Msg("capacity sweep done")
	art := agentapi.CapacitySweep{Side: side, SHA: plan.Commit(side), Sweep: sw, Knee: k}
	return a.uploadJSON(ctx, c, side, fmt.Sprintf("%s%d.json", agentapi.CapacityArtifactPrefix, n), art, log)
}

// lockstep advances two sweeps until both are done: at each step the side
// that went second last time goes first, so neither side always measures
// later than the other.
func lockstep(ctx context.Context, sweeps map[string]*capacity.Sweep, measure func(side string, rate float64) (capacity.Step, error)) error {
	order := []string{agentapi.SideBase, agentapi.SideHead}
	for {
		progressed := false
		for _, name := range order {
			if err := ctx.Err(); err != nil {
				return err
			}
			rate, ok := sweeps[name].Next()
			if !ok {
				continue
			}
			st, err := measure(name, rate)
			if err != nil {
				return err
			}
			if err := sweeps[name].Observe(st); err != nil {
				return fmt.Errorf("capacity step at %g requests/s (%s): %w", rate, name, err)
			}
			progressed = true
		}
		if !progressed {
			return nil
		}
		order[0], order[1] = order[1], order[0]
	}
}

// soakJob runs a soak plan on the head's engine: a steady load for the
// plan's duration, sampled after every window (internal/runner/watch), judged
// (internal/analysis/soak) and uploaded as soak.json.
func (a *Agent) soakJob(ctx context.Context, c *agentapi.ClaimResponse, plan agentapi.Plan, uuid string, dev gpu.Device, log zerolog.Logger) outcome {
	sp := plan.Soak
	s, err := a.prepare(ctx, c, plan, agentapi.SideHead, uuid, log)
	if err != nil {
		return failed(ctx, "soak", err)
	}
	defer s.release()
	var samples []soak.Sample
	err = a.withEngineRun(ctx, c, plan, s, uuid, log, func(cur *running) error {
		pid := os.Getpid() // the built-in sim runs in this process
		if cur.proc != nil {
			pid = cur.proc.PID()
		}
		var err error
		samples, err = watch.Run(ctx, watch.Options{
			Bench: a.benchOptions(plan, cur.BaseURL(), c, s), Rate: sp.Rate,
			Duration: sp.Duration.D(), Window: sp.Window.D(), PID: pid, GPU: dev,
			Log: log.With().Str("tier", "soak").Logger(),
		})
		return err
	})
	if err != nil {
		return failed(ctx, "soak", err)
	}
	rep := soak.Judge(samples, sp.Thresholds)
	log.Info().Bool("pass", rep.Pass).Int("samples", len(samples)).Msg("soak done")
	if err := a.uploadJSON(ctx, c, agentapi.SideHead, agentapi.SoakArtifact, agentapi.SoakRun{SHA: plan.HeadSHA, Samples: samples, Report: rep}, log); err != nil {
		return failed(ctx, "upload soak", err)
	}
	return outcome{jobstate.Succeeded, ""}
}

// withEngine starts s's engine, sends the plan's warm-up, runs f against
// its URL and stops it.
func (a *Agent) withEngine(ctx context.Context, c *agentapi.ClaimResponse, plan agentapi.Plan, s *side, uuid string, log zerolog.Logger, f func(url string) error) error {
	return a.withEngineRun(ctx, c, plan, s, uuid, log, func(cur *running) error { return f(cur.BaseURL()) })
}

func (a *Agent) withEngineRun(ctx context.Context, c *agentapi.ClaimResponse, plan agentapi.Plan, s *side, uuid string, log zerolog.Logger, f func(*running) error) error {
	cur, err := a.startEngine(ctx, c, plan, s, uuid, log)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
		defer cancel()
		if err := cur.Stop(sctx); err != nil {
			log.Error().Err(err).Msg("stop engine")
		}
	}()
	if plan.Warmup > 0 {
		w := a.benchOptions(plan, cur.BaseURL(), c, s)
		w.NumPrompts, w.Seed = plan.Warmup, w.Seed+1
		if _, err := bench.Run(ctx, w); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	if err := f(cur); err != nil {
		select {
		case <-cur.Exited():
			return fmt.Errorf("engine crashed: %w (%w)", cur.CrashError(), err)
		default:
		}
		return err
	}
	return nil
}

// uploadJSON uploads v as the job's artifact name.
func (a *Agent) uploadJSON(ctx context.Context, c *agentapi.ClaimResponse, side, name string, v any, log zerolog.Logger) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", name, err)
	}
	dir, err := os.MkdirTemp(a.cfg.WorkDir, "perfgate-longrun-")
	if err != nil {
		return fmt.Errorf("artifact directory: %w", err)
	}
	defer os.RemoveAll(dir)
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	resp, err := a.client.PutArtifact(ctx, c.JobID, c.LeaseID, side, p, name)
	if err != nil {
		return fmt.Errorf("upload %s: %w", name, err)
	}
	log.Info().Str("side", side).Str("name", name).Int64("bytes", resp.Size).Msg("artifact uploaded")
	return nil
}

// failed is a failed outcome naming what failed; a job ended by its
// context says so.
func failed(ctx context.Context, what string, err error) outcome {
	if ctx.Err() != nil {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			return outcome{jobstate.Failed, cause.Error()}
		}
		return outcome{jobstate.Failed, ctx.Err().Error()}
	}
	return outcome{jobstate.Failed, fmt.Sprintf("%s: %v", what, err)}
}
