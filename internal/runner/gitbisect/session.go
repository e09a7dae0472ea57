package gitbisect

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/analysis/bisect"
	"github.com/perfgate/perfgate/internal/runner/bench"
	"github.com/perfgate/perfgate/internal/runner/engine"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// Session is the engine of one checkout, started once per turn.
type Session struct {
	plan agentapi.Plan
	srv  *engine.Server
	log  zerolog.Logger
	runs int // measured so far, for run ids
}

// engineSpec is the engine of checkout co: started in it, with
// {{.Workdir}} and {{.SHA}} naming it.
func engineSpec(p agentapi.Plan, co Checkout) engine.Spec {
	return engine.Spec{
		Command: p.Engine.Command, Args: p.Engine.Args, Model: p.Engine.Model,
		ReadinessPath: p.Engine.ReadinessPath, StartTimeout: p.Engine.StartTimeout.D(), Env: p.Engine.Env,
		GPUUUID: p.GPUUUID, JobID: "bisect", Workdir: co.Dir, SHA: co.SHA,
	}
}

// Start starts the engine of checkout co (built already) and warms it up.
func Start(ctx context.Context, p agentapi.Plan, co Checkout, log zerolog.Logger) (*Session, error) {
	srv, err := engine.Start(ctx, engineSpec(p, co), log)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSkip, err)
	}
	s := &Session{plan: p, srv: srv, log: log}
	if p.Warmup > 0 {
		o := s.options()
		o.NumPrompts, o.Seed = p.Warmup, o.Seed+1
		if _, err := bench.Run(ctx, o); err != nil {
			s.Stop()
			return nil, fmt.Errorf("%w: warm-up: %w", ErrSkip, err)
		}
	}
	return s, nil
}

func (s *Session) options() bench.Options {
	w := s.plan.Workload
	return bench.Options{
		Target: s.srv.BaseURL(), Endpoint: w.Endpoint, Model: s.plan.Engine.Model,
		Dataset: w.Dataset, DatasetPath: w.DatasetPath, InputLen: w.InputLen, OutputLen: w.OutputLen,
		NumPrompts: w.NumPrompts, RequestRate: w.RequestRate, Burstiness: w.Burstiness,
		MaxConcurrency: w.MaxConcurrency, Seed: w.Seed, Temperature: w.Temperature, Timeout: w.Timeout.D(),
	}
}

// Measure makes n runs. A run with more than the plan's share of failed
// requests, or an engine that died, makes the commit unmeasurable.
func (s *Session) Measure(ctx context.Context, n int) ([]*result.Result, error) {
	maxErr := s.plan.MaxErrorRate
	if maxErr == 0 {
		maxErr = agentapi.DefaultMaxErrorRate
	}
	var out []*result.Result
	for range n {
		o := s.options()
		o.RunID = fmt.Sprintf("bisect-r%d", s.runs)
		s.runs++
		res, err := bench.Run(ctx, o)
		select {
		case <-s.srv.Exited():
			return nil, fmt.Errorf("%w: the engine crashed: %w", ErrSkip, s.srv.CrashError())
		default:
		}
		if err != nil {
			return nil, fmt.Errorf("%w: run %d: %w", ErrSkip, s.runs, err)
		}
		if total := res.Completed + res.Failed; total == 0 || float64(res.Failed)/float64(total) > maxErr {
			return nil, fmt.Errorf("%w: run %d: %d of %d requests failed", ErrSkip, s.runs, res.Failed, total)
		}
		out = append(out, res)
	}
	return out, nil
}

// Stop stops the engine.
func (s *Session) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.srv.Stop(ctx); err != nil {
		s.log.Error().Err(err).Msg("stop engine")
	}
}

// interleaved runs two checkouts' engines by turns on one machine: one
// engine at a time (as on one GPU), restarted and warmed up at each change
// of side, as the agent runs an interleaved job. Side 0 is the reference
// (the good commit), side 1 the commit measured.
type interleaved struct {
	plan  agentapi.Plan
	log   zerolog.Logger
	sides [2]Checkout
	cur   *Session
	side  int
}

// run makes one run of side's engine and returns its value of metric.
func (iv *interleaved) run(ctx context.Context, side int, metric string) (float64, error) {
	if iv.cur == nil || iv.side != side {
		iv.stop()
		s, err := Start(ctx, iv.plan, iv.sides[side], iv.log)
		if err != nil {
			return 0, err
		}
		iv.cur, iv.side = s, side
	}
	runs, err := iv.cur.Measure(ctx, 1)
	if err != nil {
		return 0, err
	}
	vs, err := bisect.RunValues(runs, metric)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrSkip, err)
	}
	return vs[0], nil
}

// pairs adds n pairs to r (Values side 1, RefValues side 0) in ABBA order
// over all of r's pairs: the reference first in even pairs. An error says
// which side failed.
func (iv *interleaved) pairs(ctx context.Context, r *bisect.Reading, n int, metric string) (side int, err error) {
	for range n {
		order := [2]int{0, 1}
		if len(r.Values)%2 == 1 {
			order = [2]int{1, 0}
		}
		var got [2]float64
		for _, side := range order {
			v, err := iv.run(ctx, side, metric)
			if err != nil {
				return side, err
			}
			got[side] = v
		}
		r.RefValues, r.Values = append(r.RefValues, got[0]), append(r.Values, got[1])
	}
	return 0, nil
}

func (iv *interleaved) stop() {
	if iv.cur != nil {
		iv.cur.Stop()
		iv.cur = nil
	}
}
