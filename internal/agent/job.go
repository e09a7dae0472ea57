package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/agentapi"
	"github.com/perfgate/perfgate/internal/bench"
	"github.com/perfgate/perfgate/internal/gpu"
	"github.com/perfgate/perfgate/internal/result"
	"github.com/perfgate/perfgate/internal/store"
)

// Why a job's context ended, as its cancel cause.
var (
	errCancelled = errors.New("cancelled by the server: superseded by a newer push")
	errLeaseLost = errors.New("lease lost")
	errCrashed   = errors.New("engine exited")
)

// stopTimeout bounds stopping the engine after a job: its grace period
// plus docker's own time.
const stopTimeout = 90 * time.Second

// outcome is how a job ended on this agent.
type outcome struct {
	status store.Status
	reason string
}

// runJob runs one claimed job to its end and reports it, unless the lease
// was lost or the agent is stopping: then the job is abandoned to the
// server's reaper.
func (a *Agent) runJob(ctx context.Context, c *agentapi.ClaimResponse) {
	jctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	jl := newJobLog(a.client, c.JobID, c.LeaseID, a.cfg.LogOutput, a.cfg.LogFlush)
	// The job log is the server's record of the job: at least info, however
	// quiet the agent's own log is.
	log := zerolog.New(jl).Level(min(a.cfg.Log.GetLevel(), zerolog.InfoLevel)).With().Timestamp().
		Int64("job_id", c.JobID).Int("attempt", c.Attempt).Str("agent", a.cfg.Name).Logger()
	logDone := jl.start(jctx)

	lease := time.Duration(c.LeaseSeconds * float64(time.Second))
	if lease <= 0 {
		lease = agentapi.DefaultLease
	}
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		a.heartbeat(jctx, c, lease, cancel, log)
	}()

	log.Info().Str("tier", c.Tier).Str("repo", c.Repo).Str("head_sha", c.HeadSHA).
		Dur("lease", lease).Msg("job claimed")
	out := a.execute(jctx, c, log)
	cancel(nil) // stops the heartbeat; the cause set before stays
	<-hbDone

	switch cause := context.Cause(jctx); {
	case errors.Is(cause, errLeaseLost):
		log.Warn().Msg("lease lost: job abandoned (the server re-queued or cancelled it)")
		jl.stop(logDone)
		return
	case errors.Is(cause, errCancelled):
		out = outcome{store.StatusCancelled, errCancelled.Error()}
	case ctx.Err() != nil:
		log.Warn().Msg("agent stopping: job abandoned; the server re-queues it when its lease lapses")
		jl.stop(logDone)
		return
	}

	// A fresh context: the job's is over, the report must still go out.
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer fcancel()
	ev := log.Info()
	if out.status != store.StatusSucceeded {
		ev = log.Error()
	}
	ev.Str("status", string(out.status)).Str("reason", out.reason).Msg("job finished")
	jl.stop(logDone)
	if err := jl.flush(fctx); err != nil {
		a.cfg.Log.Warn().Err(err).Int64("job_id", c.JobID).Msg("upload job log")
	}
	if _, err := a.client.Finish(fctx, c.JobID, agentapi.FinishRequest{
		LeaseID: c.LeaseID, Status: string(out.status), Reason: out.reason,
	}); err != nil {
		a.cfg.Log.Error().Err(err).Int64("job_id", c.JobID).Msg("finish job")
	}
}

// heartbeat renews the lease every lease/4 until ctx ends; a cancel flag
// or a lost lease ends the job.
func (a *Agent) heartbeat(ctx context.Context, c *agentapi.ClaimResponse, lease time.Duration, cancel context.CancelCauseFunc, log zerolog.Logger) {
	t := time.NewTicker(lease / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		hctx, hcancel := context.WithTimeout(ctx, lease/2)
		resp, err := a.client.Heartbeat(hctx, c.JobID, c.LeaseID)
		hcancel()
		switch {
		case errors.Is(err, agentapi.ErrLeaseLost):
			cancel(errLeaseLost)
			return
		case err != nil:
			if ctx.Err() == nil {
				log.Warn().Err(err).Msg("heartbeat failed: retrying")
			}
		case resp.Cancel:
			log.Warn().Msg("server asked to cancel the job: stopping")
			cancel(errCancelled)
			return
		}
	}
}

// execute runs the plan and says how it went. It always stops the engine
// before it returns.
func (a *Agent) execute(ctx context.Context, c *agentapi.ClaimResponse, log zerolog.Logger) outcome {
	plan, err := agentapi.ParsePlan(c.Plan)
	if err != nil {
		return outcome{store.StatusFailed, fmt.Sprintf("job %d: %v", c.JobID, err)}
	}
	if a.cfg.Sim != nil && plan.Engine.Sim == nil {
		sim := *a.cfg.Sim
		plan.Engine = agentapi.Engine{Sim: &sim, Model: plan.Engine.Model, StartTimeout: plan.Engine.StartTimeout}
		log.Warn().Msg("--sim: running the built-in simulated engine instead of the plan's engine (development only)")
	}

	uuid := plan.GPUUUID
	if uuid == "" {
		uuid = c.GPUUUID
	}
	if uuid == "" && len(a.gpus) > 0 {
		uuid = a.gpus[0]
	}
	dev, info := a.openGPU(ctx, uuid, log)
	if info.err != nil {
		return outcome{store.StatusFailed, info.err.Error()}
	}

	srv, err := a.startEngine(ctx, c, plan, uuid, log)
	if err != nil {
		if ctx.Err() != nil {
			return outcome{store.StatusFailed, ctx.Err().Error()}
		}
		return outcome{store.StatusFailed, err.Error()}
	}
	defer func() {
		// A fresh context: the job's may be what ended it, and the GPU must
		// be freed either way.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
		defer cancel()
		if err := srv.Stop(sctx); err != nil {
			log.Error().Err(err).Msg("stop engine")
		} else {
			log.Info().Msg("engine stopped")
		}
	}()

	// A crash ends whatever bench is doing at once rather than at its timeouts.
	rctx, rcancel := context.WithCancelCause(ctx)
	defer rcancel(nil)
	go func() {
		select {
		case <-srv.Exited():
			rcancel(errCrashed)
		case <-rctx.Done():
		}
	}()
	crashed := func(phase string) (outcome, bool) {
		select {
		case <-srv.Exited():
			return outcome{store.StatusFailed, fmt.Sprintf("engine crashed %s: %v", phase, srv.CrashError())}, true
		default:
			return outcome{}, false
		}
	}

	opts := a.benchOptions(plan, srv.BaseURL(), c)
	if plan.Warmup > 0 {
		w := opts
		w.NumPrompts, w.Seed = plan.Warmup, opts.Seed+1 // prompts of its own
		log.Info().Int("requests", plan.Warmup).Msg("warm-up")
		if _, err := bench.Run(rctx, w); err != nil {
			if o, ok := crashed("during warm-up"); ok {
				return o
			}
			return outcome{store.StatusFailed, fmt.Sprintf("warm-up: %v", err)}
		}
	}

	maxErr := plan.MaxErrorRate
	if maxErr == 0 {
		maxErr = agentapi.DefaultMaxErrorRate
	}
	for i := range plan.Repeats {
		log.Info().Int("run", i).Int("of", plan.Repeats).Int("prompts", opts.NumPrompts).Msg("measured run")
		sampler := gpu.NewSampler(dev, gpu.SamplerConfig{
			Interval: a.cfg.SampleInterval, Allow: srv.allow(), Log: log,
		})
		sampler.Start(rctx)
		o := opts
		o.RunID = fmt.Sprintf("job%d-a%d-r%d", c.JobID, c.Attempt, i)
		res, err := bench.Run(rctx, o)
		telemetry := sampler.Stop()
		if o, ok := crashed(fmt.Sprintf("during run %d of %d", i+1, plan.Repeats)); ok {
			return o
		}
		if err != nil {
			if ctx.Err() != nil {
				return outcome{store.StatusFailed, ctx.Err().Error()}
			}
			return outcome{store.StatusFailed, fmt.Sprintf("run %d of %d: %v", i+1, plan.Repeats, err)}
		}
		a.annotate(res, plan, srv, info.info, &telemetry)
		if err := a.upload(ctx, c, i, res, log); err != nil {
			if errors.Is(err, agentapi.ErrLeaseLost) || ctx.Err() != nil {
				return outcome{store.StatusFailed, err.Error()}
			}
			return outcome{store.StatusFailed, fmt.Sprintf("upload run %d: %v", i+1, err)}
		}
		if reason := errorRateReason(res, i, plan.Repeats, maxErr); reason != "" {
			log.Error().Int("failed", res.Failed).Int("completed", res.Completed).Msg(reason)
			return outcome{store.StatusFailed, reason}
		}
		log.Info().Int("run", i).Float64("output_throughput", res.OutputThroughput).
			Int("gpu_samples", telemetry.Samples).Bool("gpu_valid", telemetry.Valid).Msg("run uploaded")
	}
	return outcome{store.StatusSucceeded, ""}
}

type gpuInfo struct {
	info gpu.Info
	err  error // a pre-flight failure: the job must not run on this card
}

// openGPU opens the job's card and checks it. A host without telemetry
// runs the job with telemetry marked unavailable.
func (a *Agent) openGPU(ctx context.Context, uuid string, log zerolog.Logger) (gpu.Device, gpuInfo) {
	if a.cfg.GPU == nil || uuid == "" {
		reason := "no NVML on this agent"
		if a.cfg.GPU != nil {
			reason = "the agent has no GPU"
		}
		log.Warn().Str("reason", reason).Msg("GPU telemetry unavailable for this job")
		return gpu.UnavailableDevice(errors.New(reason)), gpuInfo{}
	}
	dev, err := a.cfg.GPU.Open(uuid)
	if err != nil {
		return nil, gpuInfo{err: fmt.Errorf("open GPU %s: %w", uuid, err)}
	}
	info, err := gpu.Preflight(ctx, dev, gpu.Expect{UUID: uuid})
	if errors.Is(err, gpu.ErrUnavailable) {
		log.Warn().Err(err).Msg("GPU telemetry unavailable for this job")
		return dev, gpuInfo{}
	}
	if err != nil {
		return nil, gpuInfo{err: err}
	}
	log.Info().Str("gpu", info.UUID).Str("name", info.Name).Str("driver", info.Driver).Msg("pre-flight passed")
	return dev, gpuInfo{info: info}
}

func (a *Agent) benchOptions(p agentapi.Plan, target string, c *agentapi.ClaimResponse) bench.Options {
	w := p.Workload
	path := w.DatasetPath
	if path != "" && !filepath.IsAbs(path) && a.cfg.WorkDir != "" {
		path = filepath.Join(a.cfg.WorkDir, path)
	}
	return bench.Options{
		Target: target, Endpoint: w.Endpoint, Model: p.Engine.Model,
		Dataset: w.Dataset, DatasetPath: path, InputLen: w.InputLen, OutputLen: w.OutputLen,
		NumPrompts: w.NumPrompts, RequestRate: w.RequestRate, Burstiness: w.Burstiness,
		MaxConcurrency: w.MaxConcurrency, Seed: w.Seed, Temperature: w.Temperature,
		Timeout: w.Timeout.D(),
		// The built-in sim runs in this process: its CPU is not the client's.
		CPUShared: p.Engine.Sim != nil,
		Metadata: map[string]string{
			"job_id": fmt.Sprint(c.JobID), "attempt": fmt.Sprint(c.Attempt), "tier": p.Tier,
		},
	}
}

// annotate records where the run ran.
func (a *Agent) annotate(res *result.Result, p agentapi.Plan, srv *running, info gpu.Info, telemetry *result.GPUSummary) {
	if res.Perfgate == nil {
		res.Perfgate = &result.Section{SchemaVersion: result.SchemaVersion}
	}
	env := &res.Perfgate.Environment
	if info.UUID != "" {
		info.ApplyTo(env)
	}
	env.Hostname = a.host
	env.EngineImage = srv.describe
	env.Sim = p.Engine.Sim != nil
	env.Commit = p.HeadSHA
	res.Perfgate.GPU = telemetry
}

func (a *Agent) upload(ctx context.Context, c *agentapi.ClaimResponse, i int, res *result.Result, log zerolog.Logger) error {
	data, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	// One key per lease and run: a retry of this upload stores once, a new
	// attempt stores its own.
	key := fmt.Sprintf("job-%d-lease-%s-run-%d", c.JobID, c.LeaseID, i)
	resp, err := a.client.PutResult(ctx, c.JobID, agentapi.ResultRequest{
		LeaseID: c.LeaseID, IdempotencyKey: key, RunIndex: i, Kind: string(store.KindMeasured), Result: data,
	})
	if err != nil {
		return err
	}
	log.Debug().Int64("result_id", resp.ResultID).Bool("created", resp.Created).Msg("result stored")
	return nil
}

// errorRateReason is the failure reason of a run with too many failed
// requests, or "".
func errorRateReason(res *result.Result, i, n int, limit float64) string {
	total := res.Completed + res.Failed
	if total == 0 || float64(res.Failed)/float64(total) <= limit {
		return ""
	}
	counts := map[string]int{}
	if res.Perfgate != nil {
		for m, k := range res.Perfgate.ErrorCounts {
			counts[m] = k
		}
	}
	if len(counts) == 0 {
		for _, e := range res.Errors {
			if e != "" {
				counts[e]++
			}
		}
	}
	msgs := make([]string, 0, len(counts))
	for m := range counts {
		msgs = append(msgs, m)
	}
	sort.Slice(msgs, func(x, y int) bool {
		if counts[msgs[x]] != counts[msgs[y]] {
			return counts[msgs[x]] > counts[msgs[y]]
		}
		return msgs[x] < msgs[y]
	})
	server5xx := false
	parts := make([]string, 0, 3)
	for j, m := range msgs {
		if strings.HasPrefix(m, "HTTP 5") {
			server5xx = true
		}
		if j < 3 {
			parts = append(parts, fmt.Sprintf("%dx %s", counts[m], m))
		}
	}
	what := "engine requests failed"
	if server5xx {
		what = "engine answered 5xx"
	}
	return fmt.Sprintf("%s: %d of %d requests failed in run %d of %d (limit %.1f%%): %s",
		what, res.Failed, total, i+1, n, limit*100, strings.Join(parts, "; "))
}
