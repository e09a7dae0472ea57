package capacity

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
)

// DefaultThreshold is the relative change of the sustainable rate below
// which base and head are called the same.
const DefaultThreshold = 0.10

// Unit is the sustainable rate's.
const Unit = "req/s"

// Verdict of a comparison.
type Verdict string

const (
	Regression   Verdict = "regression"   // head sustains less, beyond the noise
	Improvement  Verdict = "improvement"  // head sustains more, beyond the noise
	Same         Verdict = "same"         // within the threshold
	Inconclusive Verdict = "inconclusive" // beyond the threshold, within the noise
	Recorded     Verdict = "recorded"     // the head alone was swept (the nightly): nothing compared
)

// Side sums up one commit's sweeps.
type Side struct {
	N      int     `json:"n"`
	Median float64 `json:"median"` // of the sweeps' sustainable rates
	// Low is the lowest sustainable rate of any sweep; High the highest
	// rate any sweep did not sustain (+Inf when one never failed): the
	// range the commit's knee lies in, bisection width and repeats'
	// spread together.
	Low  float64 `json:"low"`
	High float64 `json:"high"`
}

// sideJSON is Side on the wire: JSON has no infinity, so an unbounded
// High (every sweep sustained its top rate) is written as null.
type sideJSON struct {
	N      int      `json:"n"`
	Median float64  `json:"median"`
	Low    float64  `json:"low"`
	High   *float64 `json:"high"`
}

// MarshalJSON writes an unbounded High as null.
func (s Side) MarshalJSON() ([]byte, error) {
	j := sideJSON{N: s.N, Median: s.Median, Low: s.Low}
	if !math.IsInf(s.High, 0) {
		j.High = &s.High
	}
	if math.IsInf(s.Low, 0) {
		j.Low = 0
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads null as an unbounded High.
func (s *Side) UnmarshalJSON(b []byte) error {
	var j sideJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*s = Side{N: j.N, Median: j.Median, Low: j.Low, High: math.Inf(1)}
	if j.High != nil {
		s.High = *j.High
	}
	return nil
}

// Comparison is the gate's view of base against head.
type Comparison struct {
	Base    Side    `json:"base"`
	Head    Side    `json:"head"`
	Change  float64 `json:"change"` // head median / base median - 1
	Verdict Verdict `json:"verdict"`
	Why     string  `json:"why"`
	// Threshold is the limit judged.
	Threshold float64 `json:"threshold"`
	// CannotTell marks a verdict the measurement could not give: a sweep
	// the host distorted, or a side with no sweep.
	CannotTell bool `json:"cannot_tell,omitempty"`
}

// Compare judges head's sustainable rate against base's (higher is
// better). A change smaller than threshold is Same; a larger one is only
// called when the two sides' ranges do not overlap — one side's every
// sweep failed at a rate the other's every sweep sustained — otherwise
// it is Inconclusive, and more sweeps (or a finer resolution) decide.
func Compare(base, head []Knee, threshold float64) Comparison {
	if threshold <= 0 {
		threshold = DefaultThreshold
	}
	c := Comparison{Base: summarise(base), Head: summarise(head), Threshold: threshold}
	if c.Base.N == 0 || c.Head.N == 0 {
		c.Verdict, c.Why, c.CannotTell = Inconclusive, "cannot tell: no sweep finished on one side; measure again", true
		return c
	}
	// A knee the host distorted is no knee: a starved client makes the
	// engine look saturated, and comparing it would turn a worse head
	// into an improvement (or the reverse).
	for i, knees := range [][]Knee{base, head} {
		side := [...]string{"base", "head"}[i]
		for _, k := range knees {
			if k.Distorted != "" {
				c.Verdict, c.Why = Inconclusive, fmt.Sprintf("cannot tell: %s's sweep stopped because %s; measure again on a quieter runner", side, k.Distorted)
				c.CannotTell = true
				return c
			}
		}
	}
	switch {
	case c.Base.Median == 0 && c.Head.Median == 0:
		c.Verdict, c.Why = Same, "neither sustains the lowest rate"
		return c
	case c.Base.Median == 0:
		c.Change = math.Inf(1)
	default:
		c.Change = c.Head.Median/c.Base.Median - 1
	}
	switch {
	case math.Abs(c.Change) < threshold:
		c.Verdict = Same
		c.Why = fmt.Sprintf("sustainable rate %+.1f%%, within ±%.0f%%", 100*c.Change, 100*threshold)
	case c.Change < 0 && c.Head.High <= c.Base.Low:
		c.Verdict = Regression
		c.Why = fmt.Sprintf("sustainable rate %s → %s req/s (%+.1f%%): head failed at %s req/s, which base sustained",
			rateText(c.Base.Median), rateText(c.Head.Median), 100*c.Change, rateText(c.Head.High))
	case c.Change > 0 && c.Head.Low >= c.Base.High:
		c.Verdict = Improvement
		c.Why = fmt.Sprintf("sustainable rate %s → %s req/s (%+.1f%%): head sustained %s req/s, where base failed",
			rateText(c.Base.Median), rateText(c.Head.Median), 100*c.Change, rateText(c.Head.Low))
	default:
		c.Verdict = Inconclusive
		c.Why = fmt.Sprintf("sustainable rate %s → %s req/s (%+.1f%%), but the knees' ranges overlap (base %s, head %s): sweep again or narrow the resolution",
			rateText(c.Base.Median), rateText(c.Head.Median), 100*c.Change, rangeText(c.Base), rangeText(c.Head))
	}
	return c
}

// Record sums up the head's sweeps with no base to compare (the nightly
// sweeps the branch head alone): its knee is recorded, under the threshold
// a comparison would use.
func Record(head []Knee, threshold float64) Comparison {
	if threshold <= 0 {
		threshold = DefaultThreshold
	}
	c := Comparison{Head: summarise(head), Verdict: Recorded, Why: "no base was swept: the head's knee is recorded", Threshold: threshold}
	if c.Head.N == 0 {
		c.Verdict, c.Why, c.CannotTell = Inconclusive, "cannot tell: no sweep of the head finished; measure again", true
	}
	for _, k := range head {
		if k.Distorted != "" {
			c.Verdict, c.Why, c.CannotTell = Inconclusive, fmt.Sprintf("cannot tell: head's sweep stopped because %s; measure again on a quieter runner", k.Distorted), true
		}
	}
	return c
}

func summarise(knees []Knee) Side {
	s := Side{N: len(knees)}
	if s.N == 0 {
		return s
	}
	rates := make([]float64, 0, s.N)
	s.Low = math.Inf(1)
	for _, k := range knees {
		rates = append(rates, k.Rate)
		s.Low = math.Min(s.Low, k.Rate)
		hi := k.Below
		if k.Censored || hi == 0 {
			hi = math.Inf(1)
		}
		s.High = math.Max(s.High, hi)
	}
	slices.Sort(rates)
	if s.N%2 == 1 {
		s.Median = rates[s.N/2]
	} else {
		s.Median = (rates[s.N/2-1] + rates[s.N/2]) / 2
	}
	return s
}

func rangeText(s Side) string {
	if math.IsInf(s.High, 1) {
		return fmt.Sprintf("≥ %s", rateText(s.Low))
	}
	return fmt.Sprintf("%s–%s", rateText(s.Low), rateText(s.High))
}

func rateText(r float64) string {
	if math.IsInf(r, 1) {
		return "∞"
	}
	return fmt.Sprintf("%.3g", r)
}
