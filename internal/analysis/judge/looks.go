package judge

import (
	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// prLooks is the look budget a judgement continues: the check's own, else
// — for a commit that changes no file against an earlier commit of the
// same pull request (an empty commit, a re-push) — the budget that
// commit's check left, so pushing cannot reset the error budget. A commit
// that changes the code is a new question with a budget of its own.
func prLooks(in Input, runs []*result.Result) gate.Looks {
	own := in.Looks
	if len(own.Spent) > 0 {
		return own
	}
	tree := ""
	for _, r := range runs {
		if r != nil && r.Perfgate != nil && r.Perfgate.Environment.SourceTree != "" {
			tree = r.Perfgate.Environment.SourceTree
			break
		}
	}
	if tree == "" {
		return own
	}
	var best *EarlierLooks
	for i := range in.Earlier {
		e := &in.Earlier[i]
		if e.SourceTree != tree || len(e.Looks.Spent) == 0 {
			continue
		}
		if best == nil || e.UpdatedAt.After(best.UpdatedAt) {
			best = e
		}
	}
	if best == nil {
		return own
	}
	return best.Looks
}

// nextLook readies the options of a judgement of n runs (pairs): past the
// plan's last look, afterPlan says what follows (stands: the stored
// verdict stands); otherwise the look is the last when the settle budget
// cannot follow it with another.
func nextLook(opt gate.Options, budget settling, n int, stored bool) (gate.Options, bool) {
	if opt.Looks.Final() {
		var stands bool
		if opt, stands = afterPlan(opt, n, stored); stands {
			return opt, true
		}
	}
	if !opt.Reuse {
		opt.LastLook = budget.last(n)
	}
	return opt, false
}

// afterPlan decides what a judgement does once the plan's looks are spent.
// New evidence — a maintainer's `/perf retest` after the last look — starts
// a new plan with α of its own (the check states it and the pull request's
// bound). The same evidence again leaves the stored verdict standing; and
// where none was stored (extensions that measured nothing spent the
// looks), it is judged at the last look's levels, spending nothing, so the
// pull request always keeps a verdict.
func afterPlan(opt gate.Options, have int, stored bool) (gate.Options, bool) {
	last := opt.Looks.Spent[len(opt.Looks.Spent)-1]
	switch {
	case have > last.CandidateRuns:
		opt.Looks = opt.Looks.NextRound()
		return opt, false
	case stored:
		return opt, true
	}
	opt.Reuse = true
	return opt, false
}
