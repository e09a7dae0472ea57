package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/perfgate/perfgate/internal/analysis/judge"
	"github.com/perfgate/perfgate/internal/github/baseline"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// loaded is what the load read for one judgement: the judgement's Input,
// and what storing its decision needs beside it, read here so that after
// the judgement comes one store step and nothing else.
type loaded struct {
	in judge.Input
	// card is the GPU the check's runs ran on (cardOf): runs added, or
	// the base commit measured, are pinned to it. Read for a plain or
	// interleaved check that measured something.
	card string
	// baseHistory is the stored baselines (newest first) of the key the
	// base commit measured for the check is promoted under: the rules
	// check the promotion against them. A nightly matrix's new cell had
	// none (the load found no baseline for it).
	baseHistory []store.Baseline
	// accepted are the notes of the appeals maintainers accepted against
	// the commit while nothing was held (acceptedAppeals): a regression
	// verdict holds on them.
	accepted []string
	// findings are what a regression verdict's knowledge-base line and
	// profiling pass go on (loadFindings); nil when findings are off.
	findings *regressionFacts
}

// load reads from the store everything the judgement of a check run whose
// jobs have all ended goes on, and what storing its decision needs. It
// writes nothing; job is the job whose end triggered the judgement.
func (s *Service) load(ctx context.Context, cr store.CheckRun, job store.Job) (loaded, error) {
	in, err := s.loadInput(ctx, cr, job)
	if err != nil {
		return loaded{}, err
	}
	l := loaded{in: in}
	if s.docOf(cr).Held == "" {
		l.accepted = s.acceptedAppeals(ctx, cr)
	}
	if len(in.Cells) == 0 && (len(in.Runs.Runs) > 0 || in.Interleaved != nil) {
		l.card = s.cardOf(ctx, cr.JobIDs)
	}
	if s.findings != nil {
		l.findings = s.loadFindings(ctx, cr, job)
	}
	if in.MeasuredBase != nil && len(in.MeasuredBase.Runs) > 0 {
		if l.baseHistory, err = s.judging().BaselineHistory(ctx, job.Repo, job.Tier); err != nil {
			return loaded{}, fmt.Errorf("load the baselines of %s %s: %w", job.Repo, job.Tier, err)
		}
	}
	return l, nil
}

// loadInput reads everything the judgement goes on, as one judge.Input:
// the tier, the candidate's evidence (plain runs, interleaved runs, or a
// nightly matrix's cells), the baseline and noise history it may use, the
// look and settle budgets spent so far.
func (s *Service) loadInput(ctx context.Context, cr store.CheckRun, job store.Job) (judge.Input, error) {
	if job.Kind == kindBaseline {
		return s.loadMeasuredBase(ctx, cr, job)
	}
	jobs, err := s.jobsOf(ctx, cr.JobIDs)
	if err != nil {
		return judge.Input{}, err
	}
	cells := map[string][]int64{}
	interleaved := false
	for _, j := range jobs {
		cells[j.snap.Cell] = append(cells[j.snap.Cell], j.ID)
		interleaved = interleaved || j.snap.Interleave != nil
	}
	in, err := s.inputOf(cr, job)
	if err != nil {
		return judge.Input{}, err
	}
	switch {
	case isMatrix(cells):
		return s.loadMatrix(ctx, cr, in, cells)
	case interleaved:
		return s.loadPaired(ctx, cr, job, in)
	}
	ev, err := s.runsOf(ctx, cr.JobIDs)
	if err != nil {
		return judge.Input{}, err
	}
	in.Runs = ev.judged()
	if len(ev.runs) == 0 {
		return in, nil // nothing measured: the judgement says why
	}
	snap, err := baseline.Latest(ctx, s.judging(), cr.Repo, cr.Tier)
	if errors.Is(err, store.ErrNotFound) {
		return in, nil // no baseline: the judgement measures the base commit
	}
	if err != nil {
		return judge.Input{}, err
	}
	in.Base = &judge.Base{Runs: snap.Runs, Version: snap.Version}
	return s.loadBudgets(ctx, cr, in, snap.Version)
}

// inputOf starts a check run's Input: its tier, key, the triggering job
// and what the row stored of its earlier judgements.
func (s *Service) inputOf(cr store.CheckRun, job store.Job) (judge.Input, error) {
	tier, err := tierOf(job)
	if err != nil {
		return judge.Input{}, err
	}
	doc := s.docOf(cr)
	return judge.Input{
		Tier: tier, Key: cr.Tier,
		Job:    judge.Ended{ID: job.ID, Status: string(job.Status), FailureReason: job.FailureReason},
		Looks:  doc.Looks[cr.Tier],
		Stored: doc.Report != nil,
	}, nil
}

// loadMeasuredBase is the Input of a check whose base commit was measured
// because no baseline was stored: that job's runs are the baseline (the
// judgement promotes them), the check's own jobs the candidate.
func (s *Service) loadMeasuredBase(ctx context.Context, cr store.CheckRun, job store.Job) (judge.Input, error) {
	base, err := s.runsOf(ctx, []int64{job.ID})
	if err != nil {
		return judge.Input{}, err
	}
	mb := base.judged()
	if len(base.runs) == 0 {
		return judge.Input{Key: cr.Tier, MeasuredBase: &mb}, nil
	}
	cand, err := s.runsOf(ctx, cr.JobIDs)
	if err != nil {
		return judge.Input{}, err
	}
	in, err := s.inputOf(cr, job)
	if err != nil {
		return judge.Input{}, err
	}
	in.Runs, in.MeasuredBase = cand.judged(), &mb
	if len(cand.runs) == 0 {
		return in, nil
	}
	// The base's runs are not stored yet: no stored baseline is left out
	// of the history (the promoted one will be the only one it could be).
	return s.loadBudgets(ctx, cr, in, 0)
}

// loadBudgets adds what a plain or interleaved judgement spends and
// weighs its noise by: the history of the stored baselines other than
// version against, the budgets earlier commits of the pull request left,
// the settle budget's jobs, and whether the runs are the default branch's.
func (s *Service) loadBudgets(ctx context.Context, cr store.CheckRun, in judge.Input, against int) (judge.Input, error) {
	h, err := baseline.History(ctx, s.judging(), cr.Repo, in.Key, against)
	if err != nil {
		return judge.Input{}, err
	}
	in.History = h
	if len(in.Looks.Spent) == 0 {
		in.Earlier = s.earlierLooks(ctx, cr, in.Key)
	}
	in.Settle = s.settleOf(ctx, cr.JobIDs)
	in.DefaultBranch = s.onDefaultBranch(ctx, cr)
	return in, nil
}

// earlierLooks are the look budgets the pull request's checks of the tier
// at other commits left for key (judge.Input.Earlier): a commit that
// changes no file continues them. Unreadable, they are none.
func (s *Service) earlierLooks(ctx context.Context, cr store.CheckRun, key string) []judge.EarlierLooks {
	if cr.PRNumber <= 0 {
		return nil
	}
	rows, err := s.judging().ListCheckRuns(ctx, cr.Repo, cr.PRNumber)
	if err != nil {
		return nil
	}
	var out []judge.EarlierLooks
	for _, r := range rows {
		if r.ID == cr.ID || r.Tier != cr.Tier || r.HeadSHA == cr.HeadSHA {
			continue
		}
		d := s.docOf(r)
		if d.Env == nil || len(d.Looks[key].Spent) == 0 {
			continue
		}
		out = append(out, judge.EarlierLooks{SourceTree: d.Env.SourceTree, Looks: d.Looks[key], UpdatedAt: r.UpdatedAt})
	}
	return out
}

// settleOf is the check's jobs as the settle budget counts them: the runs
// each planned, its time on the card, and whether it was added to settle.
// A job that cannot be read costs nothing.
func (s *Service) settleOf(ctx context.Context, ids []int64) judge.Settle {
	var out judge.Settle
	for _, id := range ids {
		j, err := s.judging().GetJob(ctx, id)
		if err != nil {
			continue
		}
		snap, err := snapshotOf(j)
		if err != nil {
			continue
		}
		jt := judge.JobTime{Runs: snap.Repeats, Added: j.Kind == kindExtend}
		if snap.Interleave != nil {
			jt.Runs, jt.Interleaved = 2*snap.Interleave.Pairs, true
		}
		if !j.StartedAt.IsZero() && j.FinishedAt.After(j.StartedAt) {
			jt.Minutes = j.FinishedAt.Sub(j.StartedAt).Minutes()
		}
		out.Jobs = append(out.Jobs, jt)
	}
	return out
}

// jobAt is a job with its decoded plan.
type jobAt struct {
	store.Job
	snap snapshot
}

// jobsOf reads the check's jobs and their plans.
func (s *Service) jobsOf(ctx context.Context, ids []int64) ([]jobAt, error) {
	out := make([]jobAt, 0, len(ids))
	for _, id := range ids {
		j, err := s.judging().GetJob(ctx, id)
		if err != nil {
			return nil, err
		}
		snap, err := snapshotOf(j)
		if err != nil {
			return nil, err
		}
		out = append(out, jobAt{Job: j, snap: snap})
	}
	return out, nil
}

// loadMatrix reads each cell of a nightly matrix: its runs, its own
// baseline (key "<tier>/<cell>"; none yet for a new cell), that key's
// noise history and look budget.
func (s *Service) loadMatrix(ctx context.Context, cr store.CheckRun, in judge.Input, cells map[string][]int64) (judge.Input, error) {
	labels := make([]string, 0, len(cells))
	for l := range cells {
		labels = append(labels, l)
	}
	sort.Strings(labels)
	looks := s.docOf(cr).Looks
	for _, label := range labels {
		ev, err := s.runsOf(ctx, cells[label])
		if err != nil {
			return judge.Input{}, err
		}
		c := judge.Cell{Label: label, Job: cells[label][0], Runs: ev.judged()}
		if len(ev.runs) > 0 {
			key := cellKey(cr.Tier, label)
			snap, err := baseline.Latest(ctx, s.judging(), cr.Repo, key)
			switch {
			case errors.Is(err, store.ErrNotFound):
			case err != nil:
				return judge.Input{}, err
			default:
				if c.History, err = baseline.History(ctx, s.judging(), cr.Repo, key, snap.Version); err != nil {
					return judge.Input{}, err
				}
				c.Base, c.Looks = &judge.Base{Runs: snap.Runs, Version: snap.Version}, looks[key]
			}
		}
		in.Cells = append(in.Cells, c)
	}
	return in, nil
}

// evidence is what a set of jobs measured: the runs the gate can use (and
// the session, the job, each ran in), the reasons jobs failed, and the
// runs that cannot be judged.
type evidence struct {
	runs     []*result.Result
	sessions []string // parallel to runs: the job ID each run came from
	failures []string // jobs that failed, with their reasons
	bad      []string // runs whose results cannot be judged, with why
}

// runsOf decodes the measured runs of the succeeded jobs and collects the
// failure reasons of the others. A result that cannot be decoded is left
// out and named, never a reason to leave the check open.
func (s *Service) runsOf(ctx context.Context, ids []int64) (evidence, error) {
	var ev evidence
	for _, id := range ids {
		j, err := s.judging().GetJob(ctx, id)
		if err != nil {
			return evidence{}, err
		}
		if j.Status != jobstate.Succeeded {
			if j.FailureReason != "" {
				ev.failures = append(ev.failures, fmt.Sprintf("job %d: %s", j.ID, j.FailureReason))
			}
			continue
		}
		res, err := s.judging().ListResults(ctx, id)
		if err != nil {
			return evidence{}, err
		}
		for _, r := range res {
			if r.Kind != jobstate.KindMeasured || r.Attempt != j.Attempts {
				continue // warm-ups, and runs of an attempt that was lost
			}
			if r.Side == agentapi.SideBase {
				continue // an interleaved job's base commit (paired.go judges those)
			}
			rr, err := result.Parse(r.Samples)
			if err != nil {
				ev.bad = append(ev.bad, fmt.Sprintf("run %d of job %d was left out: its result cannot be judged (%v)", r.RunIndex, id, err))
				continue
			}
			ev.runs = append(ev.runs, rr)
			ev.sessions = append(ev.sessions, strconv.FormatInt(id, 10))
		}
	}
	return ev, nil
}

// judged is the evidence as the judgement takes it.
func (ev evidence) judged() judge.Evidence {
	return judge.Evidence{Runs: ev.runs, Sessions: ev.sessions, Failures: ev.failures, Bad: ev.bad}
}
