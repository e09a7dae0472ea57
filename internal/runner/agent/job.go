package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/runner/bench"
	"github.com/perfgate/perfgate/internal/runner/engine"
	"github.com/perfgate/perfgate/internal/runner/gpu"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// Why a job's context ended, as its cancel cause.
var (
	errCancelled = errors.New("cancelled by the server: a newer push or run replaced it, or its pull request closed")
	errLeaseLost = errors.New("lease lost")
	errCrashed   = errors.New("engine exited")
)

// stopTimeout bounds stopping the engine after a job: its grace period
// plus docker's own time.
const stopTimeout = 90 * time.Second

// outcome is how a job ended on this agent.
type outcome struct {
	status jobstate.Status
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
	// Every engine start of this job shares one output budget.
	a.jobOutput = engine.NewOutputBudget(a.cfg.EngineOutput)
	defer func() { a.jobOutput = nil }()

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
		out = outcome{jobstate.Cancelled, errCancelled.Error()}
	case ctx.Err() != nil:
		log.Warn().Msg("agent stopping: job abandoned; the server re-queues it when its lease lapses")
		jl.stop(logDone)
		return
	}

	// A fresh context: the job's is over, the report must still go out.
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer fcancel()
	ev := log.Info()
	if out.status != jobstate.Succeeded {
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

// heartbeat renews the lease every CancelPoll (at most lease/4) until ctx
// ends; a cancel flag or a lost lease ends the job, so a superseded job
// stops within seconds.
func (a *Agent) heartbeat(ctx context.Context, c *agentapi.ClaimResponse, lease time.Duration, cancel context.CancelCauseFunc, log zerolog.Logger) {
	t := time.NewTicker(min(lease/4, a.cfg.CancelPoll))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		hctx, hcancel := context.WithTimeout(ctx, max(lease/2, time.Second))
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

// execute runs the plan and says how it went. It prepares each side's
// commit (source, build), then runs the measured runs in the plan's order,
// starting a side's engine when the order changes side: one engine at a
// time holds the card, and an interleaved plan of n pairs starts n+1
// engines (B | H H | B B | … ) rather than 2n. Each start is followed by
// the warm-up. It always stops the engine before it returns.
func (a *Agent) execute(ctx context.Context, c *agentapi.ClaimResponse, log zerolog.Logger) outcome {
	plan, err := agentapi.ParsePlan(c.Plan)
	if err != nil {
		return outcome{jobstate.Failed, fmt.Sprintf("job %d: %v", c.JobID, err)}
	}
	if a.cfg.Sim != nil && plan.Engine.Sim == nil {
		sim := *a.cfg.Sim
		plan.Engine = agentapi.Engine{Sim: &sim, Model: plan.Engine.Model, StartTimeout: plan.Engine.StartTimeout}
		log.Warn().Msg("--sim: running the built-in simulated engine instead of the plan's engine (development only)")
	}

	uuid := a.jobGPU(plan, c)
	dev, info := a.openGPU(ctx, uuid, log)
	if info.err != nil {
		return outcome{jobstate.Failed, info.err.Error()}
	}
	if plan.Profile != nil {
		return a.profileJob(ctx, c, plan, uuid, log)
	}
	if plan.Capacity != nil {
		return a.capacityJob(ctx, c, plan, uuid, log)
	}
	if plan.Soak != nil {
		return a.soakJob(ctx, c, plan, uuid, dev, log)
	}

	sides := map[string]*side{}
	defer func() {
		for _, s := range sides {
			s.release()
		}
	}()
	if o, ok := a.prepareSides(ctx, c, plan, uuid, sides, log); !ok {
		return o
	}
	logInterleave(plan, log)

	e := &engineSlot{ctx: ctx, side: "-", rcancel: func(error) {}, log: log}
	defer e.stop()
	maxErr := plan.MaxErrorRate
	if maxErr == 0 {
		maxErr = agentapi.DefaultMaxErrorRate
	}
	sched := plan.Schedule()
	for _, slot := range sched {
		s := sides[slot.Side]
		if slot.Side != e.side || e.cur == nil {
			if o, ok := a.switchEngine(e, c, plan, slot, s, sides, uuid); !ok {
				return o
			}
		}
		if o, ok := a.measuredRun(e, c, plan, slot, len(sched), s, sides, dev, info.info, maxErr); !ok {
			return o
		}
	}
	return outcome{jobstate.Succeeded, ""}
}

// jobGPU is the card a job runs on: the plan's, the claim's, or the
// agent's first.
func (a *Agent) jobGPU(plan agentapi.Plan, c *agentapi.ClaimResponse) string {
	uuid := plan.GPUUUID
	if uuid == "" {
		uuid = c.GPUUUID
	}
	if uuid == "" && len(a.gpus) > 0 {
		uuid = a.gpus[0]
	}
	return uuid
}

// prepareSides prepares each side's commit (source, build) into sides,
// and the dataset's checkout when no base side holds it.
func (a *Agent) prepareSides(ctx context.Context, c *agentapi.ClaimResponse, plan agentapi.Plan, uuid string, sides map[string]*side, log zerolog.Logger) (outcome, bool) {
	for _, name := range sidesOf(plan) {
		s, err := a.prepare(ctx, c, plan, name, uuid, log)
		if err != nil {
			if ctx.Err() != nil {
				return outcome{jobstate.Failed, ctx.Err().Error()}, false
			}
			return outcome{jobstate.Failed, err.Error()}, false
		}
		sides[name] = s
	}
	if d := plan.Workload.DatasetSHA; d != "" && sides[agentapi.SideBase] == nil {
		s, err := a.datasetCheckout(ctx, c, d, log)
		if err != nil {
			return outcome{jobstate.Failed, err.Error()}, false
		}
		sides[sideDataset] = s
	}
	return outcome{}, true
}

// logInterleave logs the order of an interleaved plan's runs.
func logInterleave(plan agentapi.Plan, log zerolog.Logger) {
	if plan.Interleave == nil {
		return
	}
	var order []string
	for _, sl := range plan.Schedule() {
		order = append(order, sl.Side[:1])
	}
	log.Info().Str("base", plan.BaseSHA).Str("head", plan.HeadSHA).Str("order", strings.Join(order, "")).
		Int("pairs", plan.Runs()/2).Msg("interleaved base and head on one card")
}

// engineSlot is the engine that holds the card during a job: the side it
// serves, and the context its crash cancels.
type engineSlot struct {
	ctx     context.Context // the job's
	cur     *running
	side    string
	rctx    context.Context
	rcancel context.CancelCauseFunc
	log     zerolog.Logger
}

// stop stops the engine, if one runs.
func (e *engineSlot) stop() {
	e.rcancel(nil)
	if e.cur == nil {
		return
	}
	// A fresh context: the job's may be what ended it, and the GPU must
	// be freed either way.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(e.ctx), stopTimeout)
	defer cancel()
	if err := e.cur.Stop(sctx); err != nil {
		e.log.Error().Err(err).Msg("stop engine")
	} else {
		e.log.Info().Msg("engine stopped")
	}
	e.cur = nil
}

// crashed says how the job failed if the engine has exited.
func (e *engineSlot) crashed(phase string) (outcome, bool) {
	select {
	case <-e.cur.Exited():
		return outcome{jobstate.Failed, fmt.Sprintf("engine crashed %s: %v", phase, e.cur.CrashError())}, true
	default:
		return outcome{}, false
	}
}

// switchEngine stops the engine in use and starts the one of slot's side,
// then warms it up.
func (a *Agent) switchEngine(e *engineSlot, c *agentapi.ClaimResponse, plan agentapi.Plan, slot agentapi.Slot, s *side, sides map[string]*side, uuid string) (outcome, bool) {
	ctx, log := e.ctx, e.log
	e.stop()
	if slot.Side != "" {
		log.Info().Str("side", slot.Side).Str("sha", s.sha).Msg("starting the engine of " + describeSide(slot.Side, s.sha))
	}
	cur, err := a.startEngine(ctx, c, plan, s, uuid, log)
	if err != nil {
		if ctx.Err() != nil {
			return outcome{jobstate.Failed, ctx.Err().Error()}, false
		}
		if slot.Side != "" {
			err = fmt.Errorf("%s engine: %w", slot.Side, err)
		}
		return outcome{jobstate.Failed, err.Error()}, false
	}
	e.cur, e.side = cur, slot.Side
	// A crash ends whatever bench is doing at once rather than at
	// its timeouts.
	e.rctx, e.rcancel = context.WithCancelCause(ctx)
	go func(r *running, rctx context.Context, rcancel context.CancelCauseFunc) {
		select {
		case <-r.Exited():
			rcancel(errCrashed)
		case <-rctx.Done():
		}
	}(e.cur, e.rctx, e.rcancel)
	if plan.Warmup > 0 {
		w := a.benchOptions(plan, e.cur.BaseURL(), c, datasetSide(sides, s))
		w.NumPrompts, w.Seed = plan.Warmup, w.Seed+1 // prompts of its own
		log.Info().Int("requests", plan.Warmup).Msg("warm-up")
		if _, err := bench.Run(e.rctx, w); err != nil {
			if o, ok := e.crashed("during warm-up"); ok {
				return o, false
			}
			return outcome{jobstate.Failed, fmt.Sprintf("warm-up: %v", err)}, false
		}
	}
	return outcome{}, true
}

// measuredRun runs slot's measured run on the engine in use, with the
// card sampled, and uploads its result.
func (a *Agent) measuredRun(e *engineSlot, c *agentapi.ClaimResponse, plan agentapi.Plan, slot agentapi.Slot, runs int, s *side, sides map[string]*side, dev gpu.Device, info gpu.Info, maxErr float64) (outcome, bool) {
	ctx, log := e.ctx, e.log
	what := fmt.Sprintf("run %d of %d", slot.RunIndex+1, runs)
	if slot.Side != "" {
		what = fmt.Sprintf("run %d of %d (%s, pair %d)", slot.RunIndex+1, runs, slot.Side, slot.Pair+1)
	}
	opts := a.benchOptions(plan, e.cur.BaseURL(), c, datasetSide(sides, s))
	log.Info().Int("run", slot.RunIndex).Int("of", runs).Str("side", slot.Side).Int("pair", slot.Pair).
		Int("prompts", opts.NumPrompts).Msg("measured run")
	sampler := gpu.NewSampler(dev, gpu.SamplerConfig{
		Interval: a.cfg.SampleInterval, Allow: e.cur.allow(), Log: log,
	})
	sampler.Start(e.rctx)
	opts.RunID = fmt.Sprintf("job%d-a%d-r%d", c.JobID, c.Attempt, slot.RunIndex)
	// Every run replays the same prompts; salted apart, none finds the
	// previous run's in the engine's prefix cache, so the first run
	// after an engine start is no colder than the others.
	opts.CacheSalt = opts.RunID
	cpu0, cpuOK := e.cur.cpuTime()
	res, err := bench.Run(e.rctx, opts)
	telemetry := sampler.Stop()
	cpu1, cpuOK1 := e.cur.cpuTime()
	if o, ok := e.crashed("during " + what); ok {
		return o, false
	}
	if err != nil {
		if ctx.Err() != nil {
			return outcome{jobstate.Failed, ctx.Err().Error()}, false
		}
		return outcome{jobstate.Failed, fmt.Sprintf("%s: %v", what, err)}, false
	}
	a.annotate(res, plan, e.cur, s, info, &telemetry)
	a.readEngine(e.rctx, res, plan, e.cur, sides, s)
	if cpuOK && cpuOK1 && cpu1 > cpu0 {
		res.Perfgate.EngineCPUSeconds = (cpu1 - cpu0).Seconds()
	}
	if err := a.upload(ctx, c, slot, res, log); err != nil {
		if errors.Is(err, agentapi.ErrLeaseLost) || ctx.Err() != nil {
			return outcome{jobstate.Failed, err.Error()}, false
		}
		return outcome{jobstate.Failed, fmt.Sprintf("upload %s: %v", what, err)}, false
	}
	if reason := errorRateReason(res, slot.RunIndex, runs, maxErr); reason != "" {
		log.Error().Int("failed", res.Failed).Int("completed", res.Completed).Msg(reason)
		return outcome{jobstate.Failed, reason}, false
	}
	log.Info().Int("run", slot.RunIndex).Str("side", slot.Side).Float64("output_throughput", res.OutputThroughput).
		Int("gpu_samples", telemetry.Samples).Bool("gpu_valid", telemetry.Valid).Msg("run uploaded")
	return outcome{}, true
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

// datasetSide is the side whose checkout holds the workload's dataset when
// s runs: the base side of an interleaved job, for both sides, or the
// plan's dataset commit (the pull request's base) of a job that measures
// the head alone, so the head of a pull request cannot make its own
// prompts shorter; s otherwise (a job of one commit: nightly, bisect).
func datasetSide(sides map[string]*side, s *side) *side {
	if b := sides[agentapi.SideBase]; b != nil && b.checkout != nil {
		return b
	}
	if d := sides[sideDataset]; d != nil && d.checkout != nil {
		return d
	}
	return s
}

// sideDataset names the checkout a head-only job reads its dataset from.
const sideDataset = "dataset"

// datasetCheckout fetches the commit that holds a head-only job's dataset
// (agentapi.Workload.DatasetSHA) through the server, as a side that runs
// nothing.
func (a *Agent) datasetCheckout(ctx context.Context, c *agentapi.ClaimResponse, sha string, log zerolog.Logger) (*side, error) {
	co, err := a.cache.Get(ctx, sha, func(ctx context.Context) (io.ReadCloser, error) {
		log.Info().Str("sha", sha).Msg("fetching the dataset's commit (the pull request's base) through the server")
		return a.client.Source(ctx, c.JobID, c.LeaseID, sha)
	})
	if err != nil {
		return nil, fmt.Errorf("source of the dataset's commit %s: %w", sha, err)
	}
	return &side{name: sideDataset, sha: sha, checkout: co}, nil
}

// benchOptions are a run's bench options against target. A relative
// dataset path is read from s's checkout (datasetSide; through an os.Root,
// so a symlink in the pull request cannot point the agent at its own
// files), or from the work directory when the job has no checkout.
func (a *Agent) benchOptions(p agentapi.Plan, target string, c *agentapi.ClaimResponse, s *side) bench.Options {
	w := p.Workload
	path := w.DatasetPath
	if path != "" && !filepath.IsAbs(path) {
		switch {
		case s.checkout != nil:
			path = datasetInTree(s.checkout.Dir, path)
		case a.cfg.WorkDir != "":
			path = filepath.Join(a.cfg.WorkDir, path)
		}
	}
	return bench.Options{
		Target: target, Endpoint: w.Endpoint, Model: p.Engine.Model,
		Dataset: w.Dataset, DatasetPath: path, InputLen: w.InputLen, OutputLen: w.OutputLen,
		NumPrompts: w.NumPrompts, RequestRate: w.RequestRate, Burstiness: w.Burstiness,
		MaxConcurrency: w.MaxConcurrency, Seed: w.Seed, Temperature: w.Temperature, Traffic: w.Traffic,
		Timeout: w.Timeout.D(),
		// The built-in sim runs in this process: its CPU is not the client's.
		CPUShared:  p.Engine.Sim != nil,
		MaxTTFTGap: a.cfg.MaxTTFTGap,
		Metadata: map[string]string{
			"job_id": fmt.Sprint(c.JobID), "attempt": fmt.Sprint(c.Attempt), "tier": p.Tier,
		},
	}
}

// datasetInTree resolves a dataset path inside a checkout: the real path
// when it stays inside the tree, else a path that does not exist (so the
// run fails with "no such file" rather than reading outside).
func datasetInTree(tree, rel string) string {
	root, err := os.OpenRoot(tree)
	if err != nil {
		return filepath.Join(tree, rel)
	}
	defer root.Close()
	if _, err := root.Stat(rel); err != nil {
		return filepath.Join(tree, ".perfgate-refused", filepath.Base(rel))
	}
	real, err := filepath.EvalSymlinks(filepath.Join(tree, rel))
	treeReal, err2 := filepath.EvalSymlinks(tree)
	if err != nil || err2 != nil || !strings.HasPrefix(real, treeReal+string(filepath.Separator)) {
		return filepath.Join(tree, ".perfgate-refused", filepath.Base(rel))
	}
	return real
}

// annotate records where the run ran: the card, the host, the engine and
// what contained it, and the commit and tree the engine ran from.
func (a *Agent) annotate(res *result.Result, p agentapi.Plan, srv *running, s *side, info gpu.Info, telemetry *result.GPUSummary) {
	if res.Perfgate == nil {
		res.Perfgate = &result.Section{SchemaVersion: result.SchemaVersion}
	}
	env := &res.Perfgate.Environment
	if info.UUID != "" {
		info.ApplyTo(env)
	}
	env.Hostname = a.host
	cpu := theHostCPU()
	env.CPUModel, env.CPUCores, env.CPUGovernor = cpu.model, cpu.cores, cpu.governor
	env.EngineImage, env.EngineCommand = srv.describe, srv.command
	env.Sim = p.Engine.Sim != nil
	env.Commit = s.sha
	env.SourceTree = s.tree()
	env.EngineBuild = s.built
	env.Sandbox = s.sandbox
	res.Perfgate.GPU = telemetry
}

func (a *Agent) upload(ctx context.Context, c *agentapi.ClaimResponse, slot agentapi.Slot, res *result.Result, log zerolog.Logger) error {
	if res.Perfgate != nil {
		// The file says where it ran, so `perfgate compare --paired`
		// rebuilds the pairs and engine starts as the server does.
		res.Perfgate.Place = &result.Place{Job: c.JobID, Side: slot.Side, Pair: slot.Pair, Seq: slot.RunIndex}
	}
	data, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	// One key per lease and run: a retry of this upload stores once, a new
	// attempt stores its own.
	key := fmt.Sprintf("job-%d-lease-%s-run-%d", c.JobID, c.LeaseID, slot.RunIndex)
	resp, err := a.client.PutResult(ctx, c.JobID, agentapi.ResultRequest{
		LeaseID: c.LeaseID, IdempotencyKey: key, RunIndex: slot.RunIndex, Kind: string(jobstate.KindMeasured),
		Side: slot.Side, Pair: slot.Pair, Result: data,
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
