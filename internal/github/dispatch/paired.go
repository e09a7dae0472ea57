package dispatch

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/result"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// pairHistoryJobs caps the earlier interleaved jobs whose pairs are the
// noise prior of a paired comparison.
const pairHistoryJobs = 8

// interleaved reports whether the check's jobs measure base and head in
// one job (an interleaved plan): those are judged pair by pair.
func (s *Service) interleaved(ctx context.Context, ids []int64) (bool, error) {
	for _, id := range ids {
		j, err := s.judging().GetJob(ctx, id)
		if err != nil {
			return false, err
		}
		snap, err := snapshotOf(j)
		if err != nil {
			return false, err
		}
		if snap.Interleave != nil {
			return true, nil
		}
	}
	return false, nil
}

// sidedEvidence is what interleaved jobs measured: each measured run with
// its side and pair, the order each job ran its sides in, and the commits.
type sidedEvidence struct {
	runs     []gate.SidedRun
	orders   []string // per job: "job 12: B H H B …"
	commits  map[string]string
	failures []string
	bad      []string
}

// sidedOf reads the measured runs of the succeeded interleaved jobs, in
// the order they ran; a run of a job that measured one commit has no side
// and is left out with a note.
func (s *Service) sidedOf(ctx context.Context, ids []int64) (sidedEvidence, error) {
	ev := sidedEvidence{commits: map[string]string{}}
	for _, id := range ids {
		j, err := s.judging().GetJob(ctx, id)
		if err != nil {
			return sidedEvidence{}, err
		}
		if j.Status != jobstate.Succeeded {
			if j.FailureReason != "" {
				ev.failures = append(ev.failures, fmt.Sprintf("job %d: %s", j.ID, j.FailureReason))
			}
			continue
		}
		res, err := s.judging().ListResults(ctx, id)
		if err != nil {
			return sidedEvidence{}, err
		}
		sort.SliceStable(res, func(a, b int) bool { return res[a].RunIndex < res[b].RunIndex })
		var order []string
		session := strconv.FormatInt(id, 10)
		for _, r := range res {
			if r.Kind != jobstate.KindMeasured || r.Attempt != j.Attempts {
				continue
			}
			if r.Side == "" {
				ev.bad = append(ev.bad, fmt.Sprintf("run %d of job %d measured one commit, not a base/head pair: left out", r.RunIndex, id))
				continue
			}
			rr, err := result.Parse(r.Samples)
			if err != nil {
				ev.bad = append(ev.bad, fmt.Sprintf("run %d of job %d was left out: its result cannot be judged (%v)", r.RunIndex, id, err))
				continue
			}
			order = append(order, strings.ToUpper(r.Side[:1]))
			if rr.Perfgate != nil && rr.Perfgate.Environment.Commit != "" {
				ev.commits[r.Side] = rr.Perfgate.Environment.Commit
			}
			ev.runs = append(ev.runs, gate.SidedRun{Session: session, Side: r.Side, Pair: r.Pair, Seq: r.RunIndex, Result: rr})
		}
		if len(order) > 0 {
			ev.orders = append(ev.orders, fmt.Sprintf("job %d: %s", id, strings.Join(order, " ")))
		}
	}
	return ev, nil
}

// judgePaired judges an interleaved check: head against base by engine
// start (or pair), with the noise of earlier interleaved jobs (else of the
// stored baselines) allowed to widen the job's own, at the α this look of
// the pull request's plan may spend. No
// stored baseline is compared with; when inconclusive, pairs are added on
// the same card while the tier's settle budget pays for them.
func (s *Service) judgePaired(ctx context.Context, cr store.CheckRun, job store.Job) error {
	tier, err := tierOf(job)
	if err != nil {
		return err
	}
	ev, err := s.sidedOf(ctx, cr.JobIDs)
	if err != nil {
		return err
	}
	notes := append([]string{}, ev.bad...)
	pairs, pnotes, err := gate.MakePairs(ev.runs)
	if err != nil {
		return s.broken(ctx, cr, true, append([]string{"pair the runs: " + err.Error()}, notes...))
	}
	notes = append(notes, pnotes...)
	if len(pairs) == 0 {
		return s.fail(ctx, cr, job, evidence{failures: ev.failures, bad: notes})
	}
	key := cr.Tier
	opt, err := s.options(ctx, cr, key, 0, nil)
	if err != nil {
		return err
	}
	if opt.History.Paired, err = s.pairHistory(ctx, cr, job); err != nil {
		return err
	}
	heads := make([]*result.Result, len(pairs))
	for i, p := range pairs {
		heads[i] = p.Head
	}
	opt.Looks = s.prLooks(ctx, cr, key, opt.Looks, heads)
	budget := s.settleBudget(ctx, cr.JobIDs, tier)
	opt, stands := s.nextLook(cr, opt, budget, len(pairs))
	if stands {
		return s.standing(ctx, cr, job, key)
	}
	rep, err := gate.ComparePaired(pairs, tier, opt)
	if err != nil {
		return s.broken(ctx, cr, false, append([]string{"compare pairs: " + err.Error()}, notes...))
	}
	looks := map[string]gate.Looks{key: rep.Looks}
	if more := rep.NeedMoreRuns - rep.CandidateRuns; rep.Verdict == gate.Inconclusive && more > 0 && budget.fits(more) {
		return s.extend(ctx, cr, job, more, looks)
	}
	notes = append(notes, budget.note(rep, envOf(heads))...)
	notes = append([]string{interleaveNote(ev)}, notes...)
	if s.onDefaultBranch(ctx, cr) {
		s.recordTrend(ctx, cr, cr.Tier, job.ID, heads, tier)
	}
	base := make([]*result.Result, len(pairs))
	for i, p := range pairs {
		base[i] = p.Base
	}
	notes = append(notes, engineFailureNotes(base, heads)...)
	return s.publish(ctx, cr, job, rep, envOf(heads), notes, looks, result.DiffSettings(settingsOf(base), settingsOf(heads)))
}

// interleaveNote says what the check measured: both commits, on one card
// (or, on a runner without a real card, one host), in which order.
func interleaveNote(ev sidedEvidence) string {
	where := "one card"
	for _, r := range ev.runs {
		if r.Result.Perfgate == nil {
			continue
		}
		env := r.Result.Perfgate.Environment
		if minutesOf(&env) == "CPU-minutes" {
			where = "one runner"
			if env.Hostname != "" {
				where += " (" + env.Hostname + ")"
			}
		} else {
			where += " (" + env.GPUUUID + ")"
		}
		break
	}
	return fmt.Sprintf("interleaved on %s: base `%s` (B) and head `%s` (H), each from its own checkout, in the order %s",
		where, rev.Short(ev.commits[agentapi.SideBase]), rev.Short(ev.commits[agentapi.SideHead]), strings.Join(ev.orders, "; "))
}

// pairHistory is the noise prior of a paired comparison: the pairs of the
// repository's latest interleaved jobs of the tier (any PR's: a constant
// effect does not move the spread of a job's ratios around their mean),
// measured under the same load as job, leaving out this check's own.
func (s *Service) pairHistory(ctx context.Context, cr store.CheckRun, job store.Job) ([][]gate.Pair, error) {
	snap, err := snapshotOf(job)
	if err != nil {
		return nil, err
	}
	jobs, err := s.judging().ListJobs(ctx, store.JobFilter{Repo: cr.Repo, Tier: cr.Tier, Status: jobstate.Succeeded, Newest: true, Limit: 4 * pairHistoryJobs})
	if err != nil {
		return nil, err
	}
	var out [][]gate.Pair
	for _, j := range jobs {
		if len(out) == pairHistoryJobs {
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
		pairs, _, err := gate.MakePairs(ev.runs)
		if err != nil || len(pairs) < 2 {
			continue // the history is a prior, not evidence: skip what does not pair
		}
		out = append(out, pairs)
	}
	return out, nil
}
