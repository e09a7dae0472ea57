package bisect

import (
	"fmt"
	"math"
	"strings"

	"github.com/perfgate/perfgate/internal/vocab/figure"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// Status is how a bisect ended.
type Status string

// Statuses.
const (
	// Found: one commit is the culprit.
	Found Status = "found"
	// Range: the culprit is one of several commits, the others between
	// them could not be measured (git bisect's "only skipped commits left").
	Range Status = "range"
	// OutOfBudget: the job budget ran out first; Candidates is where the
	// change is.
	OutOfBudget Status = "budget"
	// NoDifference: the ends are the same within MinChange.
	NoDifference Status = "no-difference"
	// Unclear: the ends' difference stayed unknown at the run cap.
	Unclear Status = "unclear"
	// EndFailed: the good or the bad commit could not be measured.
	EndFailed Status = "end-failed"
	// Unconfirmed: the search narrowed to one commit, but measured next
	// to its parent it did not differ clearly: cannot tell. Candidates
	// holds it.
	Unconfirmed Status = "unconfirmed"
)

// Result is a finished bisect.
type Result struct {
	Status  Status `json:"status"`
	Message string `json:"message"` // what happened, for people
	// Culprit is the first commit at the new level and Parent the commit
	// before it (Found); Candidates the commits the change is among when
	// it could not be narrowed to one (Range, OutOfBudget).
	Culprit    *Commit  `json:"culprit,omitempty"`
	Parent     *Commit  `json:"parent,omitempty"`
	Candidates []Commit `json:"candidates,omitempty"`
	// Change is the bad end against the good, relative (0.18 = 18% higher),
	// from their interleaved pairs.
	Change float64 `json:"change"`
	// CulpritChange is the culprit against its parent, from the pairs that
	// measured them side by side.
	CulpritChange float64 `json:"culprit_change,omitempty"`
	// Notes: more than one change, decisions forced at the run cap.
	Notes []string `json:"notes,omitempty"`
	// Commits is the number of commits after the good one; Steps the
	// commits measured between the ends; Jobs the GPU jobs and Runs the
	// measured runs of the whole bisect, references included.
	Commits int `json:"commits"`
	Steps   int `json:"steps"`
	Jobs    int `json:"jobs"`
	Runs    int `json:"runs"`
}

func (s *State) finish(status Status, message string) {
	last := len(s.Commits) - 1
	r := &Result{Status: status, Message: message, Commits: last, Jobs: s.Jobs}
	n := s.pairNoise()
	if e := s.ends(n); e.Pairs > 0 {
		r.Change = math.Expm1(e.D)
	}
	for i, c := range s.Commits {
		r.Runs += len(c.Values)
		if i != 0 && i != last && len(c.Values) > 0 {
			r.Steps++
		}
	}
	if status == Found || status == Range || status == OutOfBudget || status == Unconfirmed {
		if len(s.Between) > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("More than one change: %s differ%s from both ends; the bisect followed the first change.",
				shortList(s.Between), figure.Plural(len(s.Between), "s", "")))
		}
		if s.Second != "" {
			r.Notes = append(r.Notes, s.Second+".")
		}
		if s.Forced > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("%d decision%s stayed unknown at %d pairs and went to the nearer end.",
				s.Forced, figure.Plural(s.Forced, "", "s"), s.Config.MaxPairs))
		}
	}
	if len(s.Drift) > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("The machine drifted during the bisect (%s); every comparison is of interleaved pairs, and the ends were measured again before going on.",
			strings.Join(s.Drift, "; ")))
	}
	if status == Found {
		c, p := s.Commits[s.Hi], s.Commits[s.Lo]
		r.Culprit, r.Parent = &c, &p
		if e := s.paired(s.Hi, s.Lo, 0, n); e.Pairs > 0 {
			r.CulpritChange = math.Expm1(e.D)
		}
	}
	if status == Range || status == OutOfBudget || status == Unconfirmed {
		r.Candidates = append([]Commit(nil), s.Commits[s.Lo+1:s.Hi+1]...)
	}
	s.Result = r
	s.Pending = nil
}

// finishUnconfirmed ends a bisect whose search narrowed to one commit that
// its parent did not confirm: it says which commit is likely and that it
// cannot tell, rather than naming it.
func (s *State) finishUnconfirmed(why string) {
	s.finish(Unconfirmed, fmt.Sprintf("Cannot tell: the search narrowed to %s, but %s. Measure it again on a quieter machine, or with a larger budget.",
		describe(s.Commits[s.Hi]), why))
}

// finishNarrowed ends a bisect whose search is over: one culprit, only
// skipped commits left, or the budget spent.
func (s *State) finishNarrowed() {
	cfg := s.Config
	if s.Ends != Different {
		s.finish(OutOfBudget, fmt.Sprintf("The job budget (%d jobs) ran out before the ends' difference was clear.", cfg.MaxJobs))
		return
	}
	lo, hi := s.Commits[s.Lo], s.Commits[s.Hi]
	switch {
	case s.Hi-s.Lo == 1 && !s.Confirmed:
		s.finishUnconfirmed(fmt.Sprintf("the job budget (%d jobs) ran out before it was measured next to its parent", cfg.MaxJobs))
	case s.Hi-s.Lo == 1:
		change := ""
		if e := s.paired(s.Hi, s.Lo, 0, s.pairNoise()); e.Pairs > 0 {
			change = fmt.Sprintf(": %s %s next to its parent %s, over %d interleaved pairs", cfg.Metric, pct(math.Expm1(e.D)), rev.Short(lo.SHA), e.Pairs)
		}
		s.finish(Found, fmt.Sprintf("%s is the first commit where %s changed%s.", describe(hi), cfg.Metric, change))
	case s.midpoint() < 0:
		var skipped []string
		for _, c := range s.Commits[s.Lo+1 : s.Hi] {
			skipped = append(skipped, rev.Short(c.SHA))
		}
		s.finish(Range, fmt.Sprintf("Only commits that could not be measured are left (%s): the first bad commit is one of them or %s.",
			strings.Join(skipped, ", "), rev.Short(hi.SHA)))
	default:
		s.finish(OutOfBudget, fmt.Sprintf("The job budget (%d jobs) ran out: the change is in one of the %d commits after %s up to %s.",
			cfg.MaxJobs, s.Hi-s.Lo, rev.Short(lo.SHA), rev.Short(hi.SHA)))
	}
}

// describe names a commit: short SHA, title and PR when known.
func describe(c Commit) string {
	out := rev.Short(c.SHA)
	if c.Title != "" {
		out += " (" + c.Title
		if c.PR > 0 && !strings.Contains(c.Title, fmt.Sprintf("#%d", c.PR)) {
			out += fmt.Sprintf(", #%d", c.PR)
		}
		out += ")"
	} else if c.PR > 0 {
		out += fmt.Sprintf(" (#%d)", c.PR)
	}
	return out
}

func shortList(shas []string) string {
	out := make([]string, len(shas))
	for i, s := range shas {
		out[i] = rev.Short(s)
	}
	return strings.Join(out, ", ")
}
