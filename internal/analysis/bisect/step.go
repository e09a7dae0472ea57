package bisect

import (
	"fmt"
	"math"

	"github.com/perfgate/perfgate/internal/analysis/stats"
)

// A single step is what `git bisect run` asks of one invocation: one commit,
// measured in interleaved pairs next to the good end, judged good, bad or
// not at all. It is the same rule as the server's bisect — the ends' change
// sets the "same" margin (half of it) and the direction, the pairs are sized
// so the commit's standard error is a fifth of that change at the noise
// seen, the noise is pooled over the ends' pairs and the commit's — applied
// to the readings one invocation has, since git bisect keeps no state of
// ours between commits.

// StepDecision is one decision of a single step.
type StepDecision struct {
	Comparison         // the measured pairs against the good end
	Verdict    Verdict // Good, Bad, or Undecided (measure More pairs, or skip)
	Pairs      int     // pairs measured
	// More is the pairs to add while Undecided, sized to the noise and
	// capped by MaxPairs; 0 once the cap is reached.
	More int
	// Margin is the "same" margin (log units), Noise the pooled pair spread.
	Margin float64
	Noise  Noise
	// Between: the commit differs from both ends (only with ends).
	Between bool
	Reason  string
}

// StepMinPairs is the fewest pairs a single step decides on.
const StepMinPairs = 8

// StepConfig is the rule and caps of a single step: MinJobPairs is the
// fewest pairs of one round, InitialPairs the ends' first, MaxPairs the
// budget of one commit's pairs, Precision the sizing, and the rule's Alpha
// split over StepLooks.
func StepConfig(c Config) Config {
	c = c.withDefaults(1)
	c.Rule.Alpha /= StepLooks
	return c
}

// StepLooks splits the rule's α for "different" over the rounds a single
// step may look at (Bonferroni): the server bisect's looks are guarded by
// the adjacent confirmation, a single step's are not — its answer is final
// for git bisect.
const StepLooks = 5

// DecideEnds judges the ends' pairs (Values the bad end, RefValues the
// good): Bad when they differ (bisect on), Good when they are the same
// within MinChange on at least two rounds' pairs (nothing to bisect),
// Undecided with More pairs otherwise.
func DecideEnds(cfg Config, ends Reading) StepDecision {
	cfg = StepConfig(cfg)
	ends.Index, ends.Ref, ends.Seq = 1, 0, 1
	s := &State{Config: cfg, Readings: []Reading{ends}}
	n := s.pairNoise()
	e := s.paired(1, 0, 0, n)
	margin := math.Log1p(cfg.Rule.MinChange)
	c := cfg.Rule.test(e.D, e.SE, n.DF, margin, 0)
	d := StepDecision{Comparison: c, Verdict: Undecided, Pairs: e.Pairs, Margin: margin, Noise: n}
	// The ends' change is every later step's yardstick (its half is the
	// "same" margin, its fifth the standard error the steps aim at), and
	// no confirmation follows: measure it to that precision before using it.
	want := e.Pairs
	if n.Sigma > 0 && e.D != 0 {
		target := math.Abs(e.D) / cfg.Precision
		want = int(math.Ceil(n.Sigma * n.Sigma / (target * target)))
	}
	want = min(max(want, StepMinPairs), cfg.MaxPairs)
	switch {
	case c.Outcome == Different && e.Pairs < want:
		d.More = min(max(cfg.MinJobPairs, want-e.Pairs), cfg.MaxJobPairs, cfg.MaxPairs-e.Pairs)
		d.Reason = fmt.Sprintf("the ends differ by %s: %d more pairs to measure by how much", pct(c.Change()), d.More)
	case c.Outcome == Different:
		d.Verdict, d.Reason = Bad, fmt.Sprintf("the ends differ by %s: bisect", pct(c.Change()))
	case c.Outcome == Same && e.Pairs >= 2*cfg.InitialPairs:
		d.Verdict, d.Reason = Good, fmt.Sprintf("the ends are the same within ±%s: no change to bisect", abspct(cfg.Rule.MinChange))
	case e.Pairs >= cfg.MaxPairs:
		d.Reason = fmt.Sprintf("the ends' difference is unknown at %d pairs", e.Pairs)
	default:
		d.More = s.size(n, max(math.Abs(e.D)/2, math.Log1p(cfg.Rule.MinChange)), e.Pairs)
		if c.Outcome == Same {
			d.More = cfg.InitialPairs
		}
		d.More = min(d.More, cfg.MaxPairs-e.Pairs)
		d.Reason = fmt.Sprintf("the ends' difference is %s: %d more pairs", c.Outcome, d.More)
	}
	return d
}

// DecideStep judges a commit's pairs with the good end (Values the commit,
// RefValues the good end). With ends (the bad end's pairs with the good
// end, which DecideEnds called different) the rule is the server bisect's:
// bad when it moved significantly the ends' way, good when it stayed, with
// confidence, less than half the ends' change their way; the ends' pairs
// join the noise. Without ends (nil), "same" means within MinChange, both ways,
// and dir says which way counts as bad (0: either). Undecided says how many
// More pairs would decide at the noise seen; 0 when MaxPairs is reached.
func DecideStep(cfg Config, commit Reading, ends *Reading, dir float64) StepDecision {
	cfg = StepConfig(cfg)
	commit.Index, commit.Ref, commit.Seq = 1, 0, 2
	s := &State{Config: cfg, Readings: []Reading{commit}}
	if ends != nil {
		e := *ends
		e.Index, e.Ref, e.Seq = 2, 0, 1
		s.Readings = append(s.Readings, e)
	}
	n := s.pairNoise()
	m := s.paired(1, 0, 0, n)
	d := StepDecision{Verdict: Undecided, Pairs: m.Pairs, Noise: n}
	var effect float64
	if ends != nil {
		e := s.paired(2, 0, 0, n)
		j := s.judge(m, e, n)
		d.Comparison, d.Verdict, d.Between = j.VsGood, j.Verdict, j.Between
		d.Margin, effect, dir = math.Abs(e.D)/2, math.Abs(e.D)/2, math.Copysign(1, e.D)
	} else {
		d.Margin = math.Log1p(cfg.Rule.MinChange)
		d.Comparison, effect = cfg.Rule.test(m.D, m.SE, n.DF, d.Margin, dir), d.Margin
		switch d.Outcome {
		case Different:
			d.Verdict = Bad
		case Same:
			d.Verdict = Good
		}
	}
	// git bisect asks one question — does this commit have the change
	// chased? — so a commit whose one-sided bound stays under half the
	// ends' change their way is good even when it moved the other way (the
	// server's "same" also bounds that side, since its search places
	// levels; `--good FILE` has always judged so, JudgeToward).
	if d.Verdict == Undecided && ends != nil && m.Pairs >= StepMinPairs && !math.IsNaN(m.D) && !math.IsInf(m.SE, 1) && n.DF >= 1 {
		if m.D*dir+stats.TQuantile(1-cfg.Rule.SameAlpha, n.DF)*m.SE < d.Margin {
			d.Verdict, d.Outcome = Good, Same
			d.Reason = fmt.Sprintf("less than %s the ends' way with 95%% confidence (it moved %s, the other way: not the change chased)", abspct(math.Expm1(d.Margin)), pct(d.Change()))
			return d
		}
	}
	// A commit between the ends' levels is a second change or an unlucky
	// round near the threshold: believe it only on more pairs.
	if d.Between && m.Pairs < 2*cfg.InitialPairs && m.Pairs < cfg.MaxPairs {
		d.Verdict = Undecided
		d.More = min(s.size(n, effect, m.Pairs), cfg.MaxPairs-m.Pairs)
		d.Reason = fmt.Sprintf("differs from both ends: %d more pairs before believing it", d.More)
		return d
	}
	// git bisect takes "bad" as final: no comparison with the commit's
	// parent follows it, as the server's bisect confirms its culprit. So
	// with ends a commit is bad only when it is also nearer the bad end
	// than the good one with 95% confidence — its one-sided bound past
	// half the ends' change, the mirror of "good" above.
	// "Moved significantly" alone let a busy machine's bursts call a good
	// commit bad on its first 8 pairs (+10.4% ± 9.8% at load 17, the ends
	// reading +15.2%), and git bisect named the wrong commit.
	if ends != nil && d.Verdict == Bad && d.D*dir-stats.TQuantile(1-cfg.Rule.SameAlpha, n.DF)*m.SE < d.Margin {
		d.Verdict = Undecided
		if m.Pairs >= cfg.MaxPairs {
			d.Reason = fmt.Sprintf("moved %s, not past half the ends' change (%s) with 95%% confidence at %d pairs, the budget",
				pct(d.Change()), abspct(math.Expm1(d.Margin)), m.Pairs)
			return d
		}
		d.More = min(max(s.size(n, effect, m.Pairs), StepMinPairs-m.Pairs, cfg.MinJobPairs), cfg.MaxPairs-m.Pairs)
		d.Reason = fmt.Sprintf("moved %s, not yet past half the ends' change (%s) with 95%% confidence: %d more pairs",
			pct(d.Change()), abspct(math.Expm1(d.Margin)), d.More)
		return d
	}
	// No verdict on one short round: a single step has no adjacent
	// confirmation behind it, and a few pairs underestimate their spread.
	if d.Verdict != Undecided && m.Pairs < StepMinPairs {
		d.Verdict = Undecided
	}
	switch d.Verdict {
	case Bad:
		d.Reason = fmt.Sprintf("moved %s, significantly (±%s) and by at least %s", pct(d.Change()), abspct(math.Expm1(d.HalfWidth)), abspct(cfg.Rule.MinChange))
		if d.Between {
			d.Reason += "; it differs from the bad end too, so there is more than one change"
		}
	case Good:
		d.Reason = fmt.Sprintf("within ±%s of good with 95%% confidence", abspct(math.Expm1(d.Margin)))
	default:
		if m.Pairs >= cfg.MaxPairs {
			d.Reason = fmt.Sprintf("still unknown at %d pairs, the budget", m.Pairs)
			return d
		}
		d.More = min(max(s.size(n, effect, m.Pairs), StepMinPairs-m.Pairs), cfg.MaxPairs-m.Pairs)
		d.Reason = fmt.Sprintf("unknown: %d more pairs (sized to the noise)", d.More)
	}
	return d
}

func abspct(r float64) string { return fmt.Sprintf("%.1f%%", 100*math.Abs(r)) }
