package gate

import (
	"fmt"
	"math"

	"github.com/perfgate/perfgate/internal/analysis/stats"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

// Looks is one pull request's error budget: every judgement of its check
// (the first runs, the pairs added when that was inconclusive, each
// `/perf retest`, an appeal's re-test) is a look at growing evidence. The
// plan is group-sequential with a bounded number of looks: look k of Max
// spends the increment of a spending function f(k/Max) − f((k−1)/Max) of
// the tier's α for the regression test, and the same share of
// PassMissRate for the equivalence (pass) test. The parts add up to at
// most α and β, so by Bonferroni's inequality no sequence of looks calls
// an unchanged PR a regression with probability above α, nor passes a
// change at the threshold with probability above β, however it is
// retested. The last look decides: what the tests leave open there
// passes when the estimate is below the regression line (see decide), so
// retests converge instead of drifting into "inconclusive" for ever.
//
// The budget belongs to the pull request, not to a commit: the dispatcher
// carries it from one check of the PR to the next, so an empty commit does
// not reset it. The zero value is a fresh budget of DefaultMaxLooks looks.
type Looks struct {
	// Alpha is the family-wise one-sided α the budget splits: 1 −
	// confidence of the tier at the first look.
	Alpha float64 `json:"alpha"`
	// Max is the number of looks the plan has (0: DefaultMaxLooks); a
	// single-look comparison (a baseline promotion) uses 1.
	Max int `json:"max,omitempty"`
	// Plan is the spending function: PlanPocock (the default) or
	// PlanOBrienFleming.
	Plan string `json:"plan,omitempty"`
	// Share is the budget format before the bounded plan (each look spent
	// Share of what was left); kept so stored budgets still read. A
	// budget with Share 1 and no Max is a single look.
	Share float64 `json:"share,omitempty"`
	Spent []Look  `json:"spent,omitempty"`
	// Round numbers the plans of one pull request: a maintainer's retest
	// after a plan's last look starts a new plan (NextRound) with α of its
	// own, so the pull request's false-alarm bound is Round × α, stated
	// on the check. 0 and 1 are the first plan.
	Round int `json:"round,omitempty"`
}

// NextRound is a fresh plan after this one's looks are spent: the same α,
// looks and spending function, the next round number.
func (l Looks) NextRound() Looks {
	return Looks{Alpha: l.Alpha, Max: l.Max, Plan: l.Plan, Round: max(l.Round, 1) + 1}
}

// Rounds is the number of plans the pull request has started (at least 1).
func (l Looks) Rounds() int { return max(l.Round, 1) }

// Look is one judgement recorded in a budget.
type Look struct {
	Alpha         float64 `json:"alpha"`          // α this look spent
	Beta          float64 `json:"beta,omitempty"` // the pass test's level at this look
	BaselineRuns  int     `json:"baseline_runs"`  // evidence judged: runs, or pairs for an interleaved job
	CandidateRuns int     `json:"candidate_runs"` //
	Verdict       Verdict `json:"verdict"`
}

// Spending plans.
const (
	// PlanPocock is the Lan–DeMets Pocock-type function α·ln(1+(e−1)t):
	// nearly even looks, so the first look (which usually decides) keeps
	// a third of α.
	PlanPocock = config.SpendingPocock
	// PlanOBrienFleming is the Lan–DeMets O'Brien–Fleming-type function
	// 2 − 2Φ(z_{1−α/2}/√t): almost nothing early, nearly all of α at the
	// last look.
	PlanOBrienFleming = config.SpendingOBrienFleming
)

// DefaultMaxLooks bounds the looks of one pull request: the first job,
// the pairs added when it is inconclusive (twice), and one retest.
const DefaultMaxLooks = 4

// DefaultShare is the old budget format's share, kept for stored budgets.
const DefaultShare = 0.5

// SingleLook is a budget whose first look spends all of α: for a
// comparison that is never repeated on more evidence.
func SingleLook() Looks { return Looks{Max: 1} }

// Spend is the cumulative share of the budget a plan allows by
// information fraction t = k/K (0 ≤ t ≤ 1), for a one-sided level a.
func Spend(plan string, a, t float64) float64 {
	switch {
	case t <= 0:
		return 0
	case t >= 1:
		return a
	}
	if plan == PlanOBrienFleming {
		z := stats.NormQuantile(1 - a/2)
		return 2 - 2*stats.NormCDF(z/math.Sqrt(t))
	}
	return a * math.Log1p((math.E-1)*t)
}

// AlphaForLook is the spending rule, a pure function: the α of look k
// (1-based) of a plan of max looks at family-wise level alpha; 0 beyond
// the last look.
func AlphaForLook(plan string, alpha float64, k, maxLooks int) float64 {
	if k < 1 || k > maxLooks || maxLooks < 1 {
		return 0
	}
	return Spend(plan, alpha, float64(k)/float64(maxLooks)) - Spend(plan, alpha, float64(k-1)/float64(maxLooks))
}

// next fills the budget's defaults from the tier's α and returns the α
// and the pass level β of the look about to be taken. The budget's α is
// fixed at its first look: a tier whose confidence changes while a PR is
// being judged does not re-split what was already spent.
//
// last makes this look the plan's last (the settle budget cannot pay for
// another): it spends all of α and β that is left, and decides.
func (l Looks) next(tierAlpha float64, last, reuse bool) (Looks, float64, float64, error) {
	if l.Alpha <= 0 {
		l.Alpha = tierAlpha
	}
	if n := len(l.Spent); reuse && n > 0 {
		// The plan already looked at this evidence: judge it again at
		// that look's levels, spending nothing.
		return l, l.Spent[n-1].Alpha, l.Spent[n-1].Beta, nil
	}
	if l.Max == 0 {
		l.Max = DefaultMaxLooks
		if l.Share == 1 {
			l.Max = 1
		}
	}
	if l.Plan == "" {
		l.Plan = PlanPocock
	}
	if l.Max < 1 || (l.Plan != PlanPocock && l.Plan != PlanOBrienFleming) {
		return l, 0, 0, fmt.Errorf("look budget: plan %q of %d looks: want %s or %s, at least 1 look", l.Plan, l.Max, PlanPocock, PlanOBrienFleming)
	}
	k := len(l.Spent) + 1
	if k > l.Max {
		return l, 0, 0, fmt.Errorf("look budget: all %d looks of this pull request are spent; the last verdict stands (a maintainer can /perf ack it)", l.Max)
	}
	a := AlphaForLook(l.Plan, l.Alpha, k, l.Max)
	b := AlphaForLook(PlanPocock, PassMissRate, k, l.Max)
	if last && k < l.Max {
		a, b = l.Alpha-l.SpentAlpha(), PassMissRate-l.spentBeta()
		l.Max = k
	}
	if l.Max == 1 {
		b = PassMissRate / 2 // a single look keeps the old first-look level
	}
	// A budget stored before the bounded plan spent by another rule: never
	// past α in all.
	if left := l.Alpha - l.SpentAlpha(); a > left {
		a = left
	}
	if a <= 0 {
		return l, 0, 0, fmt.Errorf("look budget: α %g is spent after %d looks", l.Alpha, len(l.Spent))
	}
	l.Spent = append(append([]Look(nil), l.Spent...), Look{Alpha: a, Beta: b})
	return l, a, b, nil
}

// Final reports whether the look just recorded is the plan's last.
func (l Looks) Final() bool { return l.Max > 0 && len(l.Spent) >= l.Max }

// Left is the number of looks the plan still has.
func (l Looks) Left() int {
	m := l.Max
	if m == 0 {
		m = DefaultMaxLooks
	}
	return max(m-len(l.Spent), 0)
}

// SpentAlpha is the α all recorded looks spent together.
func (l Looks) SpentAlpha() float64 {
	s := 0.0
	for _, x := range l.Spent {
		s += x.Alpha
	}
	return s
}

func (l Looks) spentBeta() float64 {
	s := 0.0
	for _, x := range l.Spent {
		s += x.Beta
	}
	return s
}

// record writes the outcome of the look just taken.
func (l *Looks) record(baseRuns, candRuns int, v Verdict) {
	if n := len(l.Spent); n > 0 {
		l.Spent[n-1].BaselineRuns, l.Spent[n-1].CandidateRuns, l.Spent[n-1].Verdict = baseRuns, candRuns, v
	}
}
