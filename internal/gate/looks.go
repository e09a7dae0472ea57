package gate

import (
	"fmt"
	"math"
)

// Looks is one commit's false-alarm budget: every judgement of its check
// (the first runs, the runs added when that was inconclusive, each
// `/perf retest`, an appeal's re-test) is a look at growing evidence, and
// each look spends part of the tier's α. The spent parts add up to at most
// α, so by Bonferroni's inequality no sequence of looks calls an unchanged
// commit a regression with probability above the tier's α, however often
// it is retested.
//
// A check row stores its Looks (it marshals to JSON) and passes it back in
// Options.Looks at the next judgement of the same commit; Compare and
// ComparePaired return it updated in Report.Looks. The zero value is a
// fresh budget.
type Looks struct {
	// Alpha is the family-wise one-sided α the budget splits: 1 −
	// confidence of the tier at the first look.
	Alpha float64 `json:"alpha"`
	// Share is the fraction of the α still unspent that each look spends:
	// 0.5 (the default) gives α/2, α/4, α/8, … A single-look comparison
	// (a baseline promotion) uses 1.
	Share float64 `json:"share"`
	Spent []Look  `json:"spent,omitempty"`
}

// Look is one judgement recorded in a budget.
type Look struct {
	Alpha         float64 `json:"alpha"`          // α this look spent
	BaselineRuns  int     `json:"baseline_runs"`  // evidence judged: runs, or pairs for an interleaved job
	CandidateRuns int     `json:"candidate_runs"` //
	Verdict       Verdict `json:"verdict"`
}

// DefaultShare is the part of the remaining α each look spends.
const DefaultShare = 0.5

// SingleLook is a budget whose first look spends all of α: for a
// comparison that is never repeated on more evidence.
func SingleLook() Looks { return Looks{Share: 1} }

// AlphaForLook is the α-spending rule, a pure function: the α of the next
// look, given the tier's α (used when the budget has none yet), the
// fraction of the unspent α a look spends, and the α the budget's looks
// already spent. With the default share the looks get α/2, α/4, α/8, …
// of the tier's α, which never sum above α.
func AlphaForLook(alpha, share float64, spent []Look) float64 {
	if share <= 0 || share > 1 || math.IsNaN(share) {
		share = DefaultShare
	}
	left := alpha
	for _, l := range spent {
		left -= l.Alpha
	}
	if left <= 0 || math.IsNaN(left) {
		return 0
	}
	return share * left
}

// next fills the budget's defaults from the tier's α and returns the α of
// the look about to be taken. The budget's α is fixed at its first look: a
// tier whose confidence changes while a commit is being judged does not
// re-split what was already spent.
func (l Looks) next(tierAlpha float64) (Looks, float64, error) {
	if l.Alpha <= 0 {
		l.Alpha = tierAlpha
	}
	if l.Share == 0 {
		l.Share = DefaultShare
	}
	if l.Share < 0 || l.Share > 1 || math.IsNaN(l.Share) {
		return l, 0, fmt.Errorf("look budget: share %g outside (0, 1]", l.Share)
	}
	a := AlphaForLook(l.Alpha, l.Share, l.Spent)
	if a <= 0 {
		return l, 0, fmt.Errorf("look budget: α %g is spent after %d looks; a new commit starts a new budget", l.Alpha, len(l.Spent))
	}
	l.Spent = append(append([]Look(nil), l.Spent...), Look{Alpha: a})
	return l, a, nil
}

// SpentAlpha is the α all recorded looks spent together.
func (l Looks) SpentAlpha() float64 {
	s := 0.0
	for _, x := range l.Spent {
		s += x.Alpha
	}
	return s
}

// record writes the outcome of the look just taken.
func (l *Looks) record(baseRuns, candRuns int, v Verdict) {
	if n := len(l.Spent); n > 0 {
		l.Spent[n-1].BaselineRuns, l.Spent[n-1].CandidateRuns, l.Spent[n-1].Verdict = baseRuns, candRuns, v
	}
}
