package judge

import (
	"fmt"
	"strings"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/vocab/result"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// PairHistoryJobs caps the earlier interleaved jobs whose pairs are the
// noise prior of a paired comparison.
const PairHistoryJobs = 8

// judgePaired judges an interleaved check: head against base by engine
// start (or pair), with the noise of earlier interleaved jobs (else of the
// stored baselines) allowed to widen the job's own, at the α this look of
// the pull request's plan may spend. No stored baseline is compared with;
// when inconclusive, pairs are added on the same card while the tier's
// settle budget pays for them.
func judgePaired(in Input) Decision {
	il := in.Interleaved
	notes := append([]string{}, il.Bad...)
	pairs, pnotes, err := il.pairs()
	if err != nil {
		return broken(true, append([]string{"pair the runs: " + err.Error()}, notes...))
	}
	notes = append(notes, pnotes...)
	if len(pairs) == 0 {
		return fail(in.Job, Evidence{Failures: il.Failures, Bad: notes})
	}
	opt := gate.Options{History: in.History}
	opt.History.Paired = pairHistory(il.History)
	heads, bases := sides(pairs)
	opt.Looks = prLooks(in, heads)
	budget := in.Settle.spend(in.Tier)
	budget.interleaved = true // added evidence is pairs, whatever the jobs said
	opt, stands := nextLook(opt, budget, len(pairs), in.Stored)
	if stands {
		return Decision{Outcome: Stands, Key: in.Key}
	}
	rep, err := gate.ComparePaired(pairs, in.Tier, opt)
	if err != nil {
		return broken(false, append([]string{"compare pairs: " + err.Error()}, notes...))
	}
	looks := map[string]gate.Looks{in.Key: rep.Looks}
	if more := rep.NeedMoreRuns - rep.CandidateRuns; rep.Verdict == gate.Inconclusive && more > 0 && budget.fits(more) {
		return Decision{Outcome: Extend, More: more, Report: rep, Looks: looks}
	}
	env := envOf(heads)
	notes = append(notes, budget.note(rep, env)...)
	notes = append([]string{interleaveNote(il)}, notes...)
	var trends []Trend
	if in.DefaultBranch {
		trends = []Trend{{Key: in.Key, Job: in.Job.ID, Runs: heads}}
	}
	notes = append(notes, engineFailureNotes(bases, heads)...)
	return Decision{Outcome: Publish, Report: rep, Env: env, Notes: notes, Looks: looks,
		Settings: result.DiffSettings(settingsOf(bases), settingsOf(heads)), Trends: trends}
}

// pairs matches the runs by job and pair (numbering their engine starts),
// unless they came paired.
func (il *Interleaved) pairs() ([]gate.Pair, []string, error) {
	if il.Pairs != nil {
		return il.Pairs, il.PairNotes, nil
	}
	return gate.MakePairs(il.Runs)
}

func sides(pairs []gate.Pair) (heads, bases []*result.Result) {
	heads = make([]*result.Result, len(pairs))
	bases = make([]*result.Result, len(pairs))
	for i, p := range pairs {
		heads[i], bases[i] = p.Head, p.Base
	}
	return heads, bases
}

// pairHistory is the noise prior of a paired comparison: the pairs of the
// first PairHistoryJobs earlier jobs that pair into two or more (the
// history is a prior, not evidence: what does not pair is skipped).
func pairHistory(jobs [][]gate.SidedRun) [][]gate.Pair {
	var out [][]gate.Pair
	for _, runs := range jobs {
		if len(out) == PairHistoryJobs {
			break
		}
		if !Pairable(runs) {
			continue
		}
		pairs, _, _ := gate.MakePairs(runs)
		out = append(out, pairs)
	}
	return out
}

// interleaveNote says what the check measured: both commits, on one card
// (or, on a runner without a real card, one host), in which order.
func interleaveNote(il *Interleaved) string {
	where := "one card"
	for _, r := range il.Runs {
		if r.Result.Perfgate == nil {
			continue
		}
		env := r.Result.Perfgate.Environment
		if MinutesOf(&env) == "CPU-minutes" {
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
		where, rev.Short(il.Commits[gate.SideBase]), rev.Short(il.Commits[gate.SideHead]), strings.Join(il.Orders, "; "))
}

// Pairable reports whether one earlier job's runs count in the noise prior
// (two or more pairs): a loader reading history can stop once it has
// PairHistoryJobs such jobs.
func Pairable(runs []gate.SidedRun) bool {
	pairs, _, err := gate.MakePairs(runs)
	return err == nil && len(pairs) >= 2
}
