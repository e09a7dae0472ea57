package dispatch

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/analysis/judge"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// loadPaired is the Input of an interleaved check: each job's runs with
// their sides and pairs, the noise of the stored baselines (none is
// compared with) and of earlier interleaved jobs, and the budgets.
func (s *Service) loadPaired(ctx context.Context, cr store.CheckRun, job store.Job, in judge.Input) (judge.Input, error) {
	il, err := s.sidedOf(ctx, cr.JobIDs)
	if err != nil {
		return judge.Input{}, err
	}
	if il.History, err = s.pairHistory(ctx, cr, job); err != nil {
		return judge.Input{}, err
	}
	in.Interleaved = &il
	return s.loadBudgets(ctx, cr, in, 0)
}

// sidedOf reads the measured runs of the succeeded interleaved jobs, in
// the order they ran; a run of a job that measured one commit has no side
// and is left out with a note.
func (s *Service) sidedOf(ctx context.Context, ids []int64) (judge.Interleaved, error) {
	var runs []gate.SidedRun
	var failures, bad []string
	for _, id := range ids {
		j, err := s.judging().GetJob(ctx, id)
		if err != nil {
			return judge.Interleaved{}, err
		}
		if j.Status != jobstate.Succeeded {
			if j.FailureReason != "" {
				failures = append(failures, fmt.Sprintf("job %d: %s", j.ID, j.FailureReason))
			}
			continue
		}
		res, err := s.judging().ListResults(ctx, id)
		if err != nil {
			return judge.Interleaved{}, err
		}
		sort.SliceStable(res, func(a, b int) bool { return res[a].RunIndex < res[b].RunIndex })
		session := strconv.FormatInt(id, 10)
		for _, r := range res {
			if r.Kind != jobstate.KindMeasured || r.Attempt != j.Attempts {
				continue
			}
			if r.Side == "" {
				bad = append(bad, fmt.Sprintf("run %d of job %d measured one commit, not a base/head pair: left out", r.RunIndex, id))
				continue
			}
			rr, err := result.Parse(r.Samples)
			if err != nil {
				bad = append(bad, fmt.Sprintf("run %d of job %d was left out: its result cannot be judged (%v)", r.RunIndex, id, err))
				continue
			}
			runs = append(runs, gate.SidedRun{Session: session, Side: r.Side, Pair: r.Pair, Seq: r.RunIndex, Result: rr})
		}
	}
	ev := judge.Sided(runs)
	ev.Failures, ev.Bad = failures, bad
	return ev, nil
}

// pairHistory reads the noise prior of a paired comparison: the runs of
// the repository's latest interleaved jobs of the tier (any PR's: a
// constant effect does not move the spread of a job's ratios around their
// mean), measured under the same load as job, leaving out this check's
// own — until judge.PairHistoryJobs of them pair (judge.Pairable).
func (s *Service) pairHistory(ctx context.Context, cr store.CheckRun, job store.Job) ([][]gate.SidedRun, error) {
	snap, err := snapshotOf(job)
	if err != nil {
		return nil, err
	}
	jobs, err := s.judging().ListJobs(ctx, store.JobFilter{Repo: cr.Repo, Tier: cr.Tier, Status: jobstate.Succeeded, Newest: true, Limit: 4 * judge.PairHistoryJobs})
	if err != nil {
		return nil, err
	}
	var out [][]gate.SidedRun
	paired := 0
	for _, j := range jobs {
		if paired == judge.PairHistoryJobs {
			break
		}
		if slices.Contains(cr.JobIDs, j.ID) {
			continue
		}
		js, err := snapshotOf(j)
		if err != nil || js.Interleave == nil || js.Workload != snap.Workload {
			continue
		}
		ev, err := s.sidedOf(ctx, []int64{j.ID})
		if err != nil {
			return nil, err
		}
		if judge.Pairable(ev.Runs) {
			out = append(out, ev.Runs)
			paired++
		}
	}
	return out, nil
}
