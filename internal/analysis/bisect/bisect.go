// Package bisect finds the commit that changed a benchmark metric between a
// good and a bad commit, the way Chromium's Pinpoint does — measure the
// ends, then midpoints, with a three-outcome rule (same / different /
// unknown → measure more) — but drift-proof: no commit is ever judged
// against numbers measured in another job. Every job interleaves the
// commit it measures with a reference on the same card, pair by pair in
// ABBA order (the good end; at the end the culprit's own parent), so a
// machine that slows down, speeds up or takes a load burst meanwhile moves
// both sides of each pair alike. Each job's pairs are sized to the change
// and the noise seen so far, within a stated budget; a good end that reads
// differently from its first reading means the machine drifted, and the
// ends are measured again before anything is concluded. The culprit is
// named only when measured next to its parent it differs from it; when the
// evidence cannot say, the bisect says so ("cannot tell") rather than name
// a commit.
//
// The engine is pure. A State holds the ordered commits, every job's pairs
// and the decisions so far; Next says which commit to measure against
// which reference and how many pairs, Observe and Fail feed the answer
// back. The State is plain JSON, so a server persists it between GPU jobs
// and resumes after a restart; Run drives it with a Measurer for callers
// that can wait for each measurement.
package bisect

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/perfgate/perfgate/internal/analysis/stats"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// StateVersion is the version of the State format this code writes.
// Version 2 measures in interleaved pairs; a version 1 state (a bisect
// started before the upgrade) is refused: start it again.
const StateVersion = 2

// Defaults of a Config.
const (
	DefaultInitialPairs = 4  // the ends' first job
	DefaultMinJobPairs  = 3  // no job measures fewer
	DefaultMaxJobPairs  = 16 // nor more
	DefaultMaxPairs     = 48 // pairs of one commit against one reference, all jobs
	// DefaultPrecision sizes a job: enough pairs that the paired change's
	// standard error is a fifth of the ends' change (at the noise seen so
	// far), which decides a commit at either level with ~80% power; the
	// adjacent confirmation guards the name, and a 6 cost 20% more runs for
	// no fewer wrong names in the synthetic suite.
	DefaultPrecision = 5
	// MaxReanchors caps how often a drifting machine has the ends
	// measured again.
	MaxReanchors = 3
	// MaxReopens caps how often a culprit that its parent does not confirm
	// reopens the search.
	MaxReopens = 2
)

// ErrStale: an observation for a request that is not the pending one (a
// redelivered job result). Callers ignore it.
var ErrStale = errors.New("bisect: not the pending request")

// Config says what to bisect and how much it may spend.
type Config struct {
	Repo   string `json:"repo,omitempty"`
	Metric string `json:"metric"`         // e.g. "tpot_p90"
	Unit   string `json:"unit,omitempty"` // for the report: "ms", "tok/s"
	// LowerIsWorse is true for throughputs: it only words the report.
	LowerIsWorse bool `json:"lower_is_worse,omitempty"`
	Rule         Rule `json:"rule"`
	// InitialPairs is the pairs of the ends' first job. Later jobs are
	// sized to the ends' change and the pair noise seen so far (Precision),
	// within MinJobPairs…MaxJobPairs; MaxPairs caps one commit's pairs
	// against one reference over all jobs.
	InitialPairs int     `json:"initial_pairs"`
	MinJobPairs  int     `json:"min_job_pairs"`
	MaxJobPairs  int     `json:"max_job_pairs"`
	MaxPairs     int     `json:"max_pairs"`
	Precision    float64 `json:"precision"`
	// MaxJobs caps the GPU jobs of the whole bisect; 0 is
	// 3·⌈log2 N⌉ + 10 for N commits after the good one. The budget in runs
	// is then at most 2·MaxJobPairs·MaxJobs.
	MaxJobs int `json:"max_jobs"`
	// ConfigSHA is the commit whose perfgate config plans every job (the
	// default branch's head when the bisect started), so a config change
	// pushed meanwhile does not change how later commits are measured.
	// Empty: whatever the caller plans with.
	ConfigSHA string `json:"config_sha,omitempty"`
}

// Commit is one commit of the range and what was measured on it.
type Commit struct {
	SHA   string `json:"sha"`
	Title string `json:"title,omitempty"` // the message's first line
	PR    int    `json:"pr,omitempty"`    // the pull request that merged it, when known
	URL   string `json:"url,omitempty"`
	// Values holds every run of it, measured or as a reference, in order:
	// what the report lists. Judgements use the pairs (State.Readings).
	Values []float64 `json:"values,omitempty"`
	// Skip says why the commit could not be built or measured (git
	// bisect's exit 125); a skipped commit is never measured again.
	Skip    string  `json:"skip,omitempty"`
	Verdict Verdict `json:"verdict,omitempty"`
}

// Request asks for one GPU job: Pairs pairs of commit Index and its
// reference Ref, interleaved on one card (ABBA: ref, commit, commit, ref,
// …). Runs is 2·Pairs.
type Request struct {
	// Seq numbers the bisect's requests from 1. With the bisect's id it is
	// the job's idempotency key: a server that restarts between enqueueing
	// and observing finds its job again instead of queueing a second.
	Seq    int    `json:"seq"`
	Index  int    `json:"index"` // in State.Commits: 0 is the good end
	SHA    string `json:"sha"`
	Ref    int    `json:"ref"`
	RefSHA string `json:"ref_sha"`
	Pairs  int    `json:"pairs"`
}

// Measurement is a job's answer: Values[k] and RefValues[k] are pair k,
// one metric value per run of the commit and of the reference.
type Measurement struct {
	Values    []float64 `json:"values"`
	RefValues []float64 `json:"ref_values"`
}

// Step is one decision, in order: the evidence a report shows.
type Step struct {
	Seq   int    `json:"seq"` // jobs issued when it was taken
	Index int    `json:"index"`
	SHA   string `json:"sha"`
	// Pairs is the commit's pairs against the reference the decision
	// rests on (the good end; the parent for a confirmation).
	Pairs  int     `json:"pairs"`
	Median float64 `json:"median"`
	// VsGood and VsBad are the paired comparisons with the ends (for a
	// confirmation, VsGood is the one with the parent); for the ends' own
	// step VsBad is the bad end against the good.
	VsGood   Comparison `json:"vs_good"`
	VsBad    Comparison `json:"vs_bad"`
	Decision string     `json:"decision"`
}

// State is a bisect in progress or done. Its fields are exported for JSON;
// change it only through New, Next, Observe and Fail.
type State struct {
	Version int      `json:"version"`
	Config  Config   `json:"config"`
	Commits []Commit `json:"commits"` // [0] good … [len−1] bad, oldest first
	// Readings is every job's pairs, in order.
	Readings []Reading `json:"readings,omitempty"`
	// Lo is the newest commit known good, Hi the oldest known bad.
	Lo int `json:"lo"`
	Hi int `json:"hi"`
	// Ends is the good-against-bad outcome once it is different.
	Ends Outcome `json:"ends,omitempty"`
	// AnchorSeq: the ends' change is taken from their readings of this
	// sequence number on (a re-anchoring that disagreed with the earlier
	// ones starts it afresh). Anchor is the good end's mean log value in
	// the job that set the reference level drift is judged against.
	AnchorSeq int     `json:"anchor_seq,omitempty"`
	Anchor    float64 `json:"anchor,omitempty"`
	Anchored  bool    `json:"anchored,omitempty"`
	// Reanchor is the sequence number of the job whose good-end reading
	// showed drift: the ends are measured again after it before anything
	// is decided. Reanchors counts them.
	Reanchor  int `json:"reanchor,omitempty"`
	Reanchors int `json:"reanchors,omitempty"`
	// Current is the commit being decided; −1 for none.
	Current   int      `json:"current"`
	Confirmed bool     `json:"confirmed,omitempty"`
	Reopens   int      `json:"reopens,omitempty"`
	Pending   *Request `json:"pending,omitempty"`
	Seq       int      `json:"seq"`
	Jobs      int      `json:"jobs"`
	Steps     []Step   `json:"steps"`
	Forced    int      `json:"forced,omitempty"`
	Between   []string `json:"between,omitempty"` // commits that differ from both ends
	Second    string   `json:"second,omitempty"`  // how the culprit compares with the bad end
	Drift     []string `json:"drift,omitempty"`   // what the re-anchorings saw
	Result    *Result  `json:"result,omitempty"`
}

// New starts a bisect over commits: the good commit first, then every commit
// after it up to and including the bad one, oldest first.
func New(commits []Commit, cfg Config) (*State, error) {
	if len(commits) < 2 {
		return nil, fmt.Errorf("bisect needs a good and a bad commit, got %d commits", len(commits))
	}
	seen := map[string]bool{}
	for i, c := range commits {
		if c.SHA == "" {
			return nil, fmt.Errorf("commit %d has no SHA", i)
		}
		if seen[c.SHA] {
			return nil, fmt.Errorf("commit %s is listed twice", c.SHA)
		}
		seen[c.SHA] = true
	}
	if cfg.Metric == "" {
		return nil, errors.New("bisect needs a metric")
	}
	cfg = cfg.withDefaults(len(commits) - 1)
	s := &State{
		Version: StateVersion,
		Config:  cfg,
		Commits: make([]Commit, len(commits)),
		Lo:      0,
		Hi:      len(commits) - 1,
		Current: -1,
	}
	for i, c := range commits {
		c.Values = nil
		c.Verdict, c.Skip = "", ""
		s.Commits[i] = c
	}
	return s, nil
}

func (c Config) withDefaults(n int) Config {
	c.Rule = c.Rule.withDefaults()
	if c.MinJobPairs < 2 {
		c.MinJobPairs = DefaultMinJobPairs
	}
	if c.InitialPairs < c.MinJobPairs {
		c.InitialPairs = max(DefaultInitialPairs, c.MinJobPairs)
	}
	if c.MaxJobPairs < c.InitialPairs {
		c.MaxJobPairs = max(DefaultMaxJobPairs, c.InitialPairs)
	}
	if c.MaxPairs < c.MaxJobPairs {
		c.MaxPairs = max(DefaultMaxPairs, c.MaxJobPairs)
	}
	if c.Precision <= 0 {
		c.Precision = DefaultPrecision
	}
	if c.MaxJobs <= 0 {
		c.MaxJobs = 3*Steps(n) + 10
	}
	return c
}

// Load reads a State that Marshal wrote.
func Load(data []byte) (*State, error) {
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("decode bisect state: %w", err)
	}
	if s.Version != StateVersion {
		return nil, fmt.Errorf("bisect state version %d: this perfgate reads version %d (a bisect started by an older perfgate: start it again)", s.Version, StateVersion)
	}
	n := len(s.Commits)
	if n < 2 || s.Lo < 0 || s.Hi >= n || s.Lo >= s.Hi || s.Current >= n {
		return nil, fmt.Errorf("bisect state is inconsistent (%d commits, lo %d, hi %d, current %d)", n, s.Lo, s.Hi, s.Current)
	}
	if p := s.Pending; p != nil && (p.Index < 0 || p.Index >= n || p.Ref < 0 || p.Ref >= n) {
		return nil, fmt.Errorf("bisect state's pending request names commits %d and %d of %d", p.Index, p.Ref, n)
	}
	return &s, nil
}

// Marshal is the State as JSON.
func (s *State) Marshal() ([]byte, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode bisect state: %w", err)
	}
	return b, nil
}

// Done reports whether the bisect has a Result.
func (s *State) Done() bool { return s.Result != nil }

// Next returns the measurement to make now, or false when the bisect is done
// (s.Result then says how it ended). Until Observe or Fail answers it, Next
// returns the same request.
func (s *State) Next() (Request, bool) {
	for s.Result == nil && s.Pending == nil {
		s.step()
	}
	if s.Result != nil {
		return Request{}, false
	}
	return *s.Pending, true
}

// Observe records the pairs of the pending request: one positive value per
// run, m.Values[k] and m.RefValues[k] measured as pair k. A request that is
// not the pending one is ErrStale.
func (s *State) Observe(req Request, m Measurement) error {
	if err := s.pending(req); err != nil {
		return err
	}
	if len(m.Values) == 0 || len(m.Values) != len(m.RefValues) {
		return fmt.Errorf("observe %s: %d values and %d of the reference: want the same number of each, at least one (a job that measured nothing is a failure: Fail)",
			rev.Short(req.SHA), len(m.Values), len(m.RefValues))
	}
	for _, v := range append(append([]float64(nil), m.Values...), m.RefValues...) {
		if !(v > 0) || math.IsInf(v, 1) {
			return fmt.Errorf("observe %s: value %v: bisect compares positive metric values", rev.Short(req.SHA), v)
		}
	}
	s.Commits[req.Index].Values = append(s.Commits[req.Index].Values, m.Values...)
	s.Commits[req.Ref].Values = append(s.Commits[req.Ref].Values, m.RefValues...)
	s.Readings = append(s.Readings, Reading{Seq: req.Seq, Index: req.Index, Ref: req.Ref,
		Values: append([]float64(nil), m.Values...), RefValues: append([]float64(nil), m.RefValues...)})
	s.Pending = nil
	if ratio, ok := s.disturbed(); ok {
		s.Readings[len(s.Readings)-1].Disturbed = true
		s.record(req.Index, Comparison{}, Comparison{}, len(m.Values), fmt.Sprintf("its pairs disagree (spread %.1f× the bisect's pair noise): set aside, measured again", ratio))
		return nil
	}
	if req.Ref == 0 {
		s.watchDrift(req.Seq, logs(m.RefValues))
	}
	return nil
}

// Fail records that the pending request's job could not build or measure
// its commits. A commit measured against the good end is skipped, as git
// bisect skips on exit 125; a failed job of the ends stops the bisect; a
// failed confirmation leaves the culprit unconfirmed.
func (s *State) Fail(req Request, reason string) error {
	if err := s.pending(req); err != nil {
		return err
	}
	if reason == "" {
		reason = "could not be measured"
	}
	s.Pending = nil
	last := len(s.Commits) - 1
	switch {
	case req.Index == last && req.Ref == 0:
		s.record(last, Comparison{}, Comparison{}, 0, "the ends' job failed: "+reason)
		s.finish(EndFailed, fmt.Sprintf("The job measuring the good end %s and the bad end %s failed (%s), so there is nothing to compare: fix it or choose other ends.",
			rev.Short(s.Commits[0].SHA), rev.Short(s.Commits[last].SHA), reason))
	case req.Ref != 0:
		s.record(req.Index, Comparison{}, Comparison{}, 0, "confirmation failed: "+reason)
		s.finishUnconfirmed(fmt.Sprintf("the job measuring it next to its parent failed (%s)", reason))
	default:
		s.Commits[req.Index].Skip = reason
		if req.Index == s.Current {
			s.Current = -1
		}
		s.record(req.Index, Comparison{}, Comparison{}, 0, "skipped: "+reason)
	}
	return nil
}

func (s *State) pending(req Request) error {
	if s.Pending == nil || s.Pending.Seq != req.Seq || s.Pending.SHA != req.SHA || s.Pending.RefSHA != req.RefSHA {
		return fmt.Errorf("%w: request %d for %s", ErrStale, req.Seq, rev.Short(req.SHA))
	}
	return nil
}

// watchDrift compares the good end's level in this job with the anchor:
// beyond what the runs' spread explains, and beyond the smallest change
// worth finding, the machine drifted. The pairs are still sound (both
// sides moved), but the ends' change may not be what it was, so they are
// measured again before the next decision.
func (s *State) watchDrift(seq int, good []float64) {
	level := mean(good)
	if !s.Anchored {
		s.Anchor, s.Anchored = level, true
		return
	}
	sigma := s.levelNoise()
	limit := math.Log1p(s.Config.Rule.MinChange)
	if !math.IsNaN(sigma) {
		limit = math.Max(limit, 4*sigma*math.Sqrt(2/float64(len(good))))
	}
	moved := level - s.Anchor
	if math.Abs(moved) <= limit || s.Ends != Different || s.Reanchors >= MaxReanchors {
		return
	}
	s.Reanchor, s.Anchor = seq, level
	s.Reanchors++
	s.Drift = append(s.Drift, fmt.Sprintf("job %d: the good end read %s off its reference level", seq, pct(math.Expm1(moved))))
}

// levelNoise is the run-to-run spread of the good end's values within a
// job, pooled over jobs.
func (s *State) levelNoise() float64 {
	ss, df := 0.0, 0.0
	for _, r := range s.Readings {
		if r.Ref == 0 && len(r.RefValues) >= 2 {
			l := logs(r.RefValues)
			ss += stats.SumSq(l)
			df += float64(len(l) - 1)
		}
	}
	if df == 0 {
		return math.NaN()
	}
	return math.Sqrt(ss / df)
}

// ends is the bad end's paired change against the good end.
func (s *State) ends(n Noise) estimate {
	return s.paired(len(s.Commits)-1, 0, s.AnchorSeq, n)
}

// step takes one decision: it issues a request, finishes, or moves the
// bisect on. Each call either sets Pending or Result or changes Lo, Hi,
// Current, Ends, Reanchor or Confirmed, so Next's loop ends.
func (s *State) step() {
	last := len(s.Commits) - 1
	cfg := s.Config
	n := s.pairNoise()
	e := s.ends(n)

	if s.Ends != Different {
		if e.Pairs == 0 {
			s.request(last, 0, cfg.InitialPairs)
			return
		}
		c := cfg.Rule.test(e.D, e.SE, e.DF, math.Log1p(cfg.Rule.MinChange), 0)
		switch c.Outcome {
		case Different:
			s.Ends = Different
			s.Commits[0].Verdict, s.Commits[last].Verdict = Good, Bad
			s.recordEnds(e, c, fmt.Sprintf("the ends differ by %s: bisect", pct(c.Change())))
		case Same:
			// "Nothing to bisect" ends the bisect: claim it on more
			// than one job's pairs.
			if e.Pairs < 2*cfg.InitialPairs {
				s.recordEnds(e, c, "the ends look the same: more pairs before saying so")
				s.request(last, 0, cfg.InitialPairs)
				return
			}
			s.recordEnds(e, c, "the ends are the same")
			s.finish(NoDifference, fmt.Sprintf("%s does not differ between %s and %s (%s over %d interleaved pairs, within ±%s): there is no change to bisect.",
				cfg.Metric, rev.Short(s.Commits[0].SHA), rev.Short(s.Commits[last].SHA), pct(c.Change()), e.Pairs, pct(cfg.Rule.MinChange)))
		default:
			if e.Pairs < cfg.MaxPairs && s.Jobs < cfg.MaxJobs {
				s.recordEnds(e, c, "the ends' difference is unknown: more pairs")
				// Sized to the change the ends show (at least the
				// smallest worth finding): a clear +12% needs a few
				// more pairs, not enough to resolve 3%.
				s.request(last, 0, s.size(n, max(math.Abs(e.D)/2, math.Log1p(cfg.Rule.MinChange)), e.Pairs))
				return
			}
			s.recordEnds(e, c, "the ends' difference is unknown at the cap")
			s.finish(Unclear, fmt.Sprintf("%s changed by %s between %s and %s, which %d interleaved pairs cannot tell from noise: there is no clear change to bisect (raise the cap or reduce the noise).",
				cfg.Metric, pct(c.Change()), rev.Short(s.Commits[0].SHA), rev.Short(s.Commits[last].SHA), e.Pairs))
		}
		return
	}

	if s.Reanchor > 0 {
		s.reanchor(n)
		return
	}
	if s.Current >= 0 {
		s.decide(s.Current, n, e)
		return
	}
	if m := s.midpoint(); m >= 0 {
		s.Current = m
		s.request(m, 0, s.size(n, math.Abs(e.D)/2, 0))
		return
	}
	if !s.Confirmed {
		s.confirm(n, e)
		return
	}
	s.finishNarrowed()
}

// reanchor measures the ends again after a drift. The new pairs join the
// ends' earlier ones (each pair is drift-free, so they estimate the same
// change); a change that no longer stands out from noise sends the bisect
// back to measuring the ends rather than concluding on it.
func (s *State) reanchor(n Noise) {
	last := len(s.Commits) - 1
	var before, after []float64
	for _, r := range s.Readings {
		if r.Index == last && r.Ref == 0 {
			if r.Seq > s.Reanchor {
				after = append(after, clipped(r.diffs(), n.Sigma)...)
			} else {
				before = append(before, clipped(r.diffs(), n.Sigma)...)
			}
		}
	}
	if len(after) == 0 {
		e := s.ends(n)
		s.record(0, Comparison{}, Comparison{}, e.Pairs, fmt.Sprintf("the machine drifted (%s): the ends are measured again before going on", s.Drift[len(s.Drift)-1]))
		// A check of the change already measured, not a new estimate:
		// its pairs join the ends' earlier ones.
		s.request(last, 0, s.Config.InitialPairs)
		return
	}
	s.Reanchor = 0
	e := s.ends(n)
	c := s.Config.Rule.test(e.D, e.SE, e.DF, math.Log1p(s.Config.Rule.MinChange), 0)
	s.recordEnds(e, c, fmt.Sprintf("re-anchored: measured again the ends differ by %s (%s before the drift, %s after)", pct(c.Change()), pct(math.Expm1(mean(before))), pct(math.Expm1(mean(after)))))
	if c.Outcome != Different {
		s.Ends = ""
	}
}

// size is the pairs of a job that brings a commit with have pairs to a
// standard error of effect/Precision at the noise n, within the caps.
func (s *State) size(n Noise, effect float64, have int) int {
	cfg := s.Config
	want := cfg.InitialPairs
	if n.Sigma > 0 && effect > 0 {
		target := effect * 2 / cfg.Precision // effect is half the ends' change
		want = int(math.Ceil(n.Sigma*n.Sigma/(target*target))) - have
	}
	return max(cfg.MinJobPairs, min(want, cfg.MaxJobPairs, cfg.MaxPairs-have))
}

// decide judges the current commit by its pairs with the good end: bad when
// it moved significantly the way the ends did, good when it stayed, with
// confidence, nearer the good end; else more pairs.
func (s *State) decide(i int, n Noise, e estimate) {
	c := &s.Commits[i]
	cfg := s.Config
	m := s.paired(i, 0, 0, n)
	j := s.judge(m, e, n)
	verdict, how := j.Verdict, string(j.Verdict)
	// A commit between the ends' levels is either a second change or an
	// unlucky set of pairs near the threshold: believe it only on more.
	if j.Between && m.Pairs < 2*cfg.InitialPairs && m.Pairs < cfg.MaxPairs && s.Jobs < cfg.MaxJobs {
		s.recordJudgement(i, m, j, fmt.Sprintf("differs from both ends: %d more pairs before believing it", s.size(n, math.Abs(e.D)/2, m.Pairs)))
		s.request(i, 0, s.size(n, math.Abs(e.D)/2, m.Pairs))
		return
	}
	if verdict == Undecided {
		if m.Pairs < cfg.MaxPairs && s.Jobs < cfg.MaxJobs {
			p := s.size(n, math.Abs(e.D)/2, m.Pairs)
			s.recordJudgement(i, m, j, fmt.Sprintf("unknown: %d more pairs", p))
			s.request(i, 0, p)
			return
		}
		if s.Jobs >= cfg.MaxJobs {
			s.recordJudgement(i, m, j, "unknown, and the job budget is spent")
			s.finishNarrowed()
			return
		}
		// At the cap: the nearer end, said so; the confirmation against
		// the parent checks it.
		verdict = Good
		if math.Abs(j.VsGood.D) > math.Abs(j.VsBad.D) {
			verdict = Bad
		}
		how = fmt.Sprintf("%s: nearer the %s end (unknown at %d pairs)", verdict, verdict, cfg.MaxPairs)
		s.Forced++
	}
	if j.Between {
		how += ": differs from both ends, so there is more than one change; following the first"
		s.Between = append(s.Between, c.SHA)
	}
	c.Verdict = verdict
	if verdict == Good {
		s.Lo = i
	} else {
		s.Hi = i
	}
	s.Current = -1
	s.recordJudgement(i, m, j, how)
}

// judge compares a commit's paired change m with the ends' e: against the
// good end directly, against the bad end by the difference of the two
// paired changes (both measured against the good end, so drift cancels in
// each).
func (s *State) judge(m, e estimate, n Noise) Judgement {
	r := s.Config.Rule
	margin, dir := math.Abs(e.D)/2, math.Copysign(1, e.D)
	j := Judgement{Verdict: Undecided,
		VsGood: r.test(m.D, m.SE, n.DF, margin, dir),
		VsBad:  r.test(e.D-m.D, math.Hypot(m.SE, e.SE), n.DF, margin, dir),
	}
	switch j.VsGood.Outcome {
	case Different:
		j.Verdict = Bad
		j.Between = j.VsBad.Outcome == Different
	case Same:
		j.Verdict = Good
	}
	return j
}

// confirm measures the culprit next to its parent, the adjacent comparison
// Pinpoint ends on. Different (the ends' way): confirmed. Same: one of the
// two verdicts was wrong — they sit at one level, which the pairs of both
// against the good end place, and the search reopens around them. Unknown
// at the cap: cannot tell.
func (s *State) confirm(n Noise, e estimate) {
	last := len(s.Commits) - 1
	h, p := s.Hi, s.Lo
	if h-p > 1 || (p == 0 && h == last) {
		s.Confirmed = true // a range of skipped commits, or the ends themselves
		return
	}
	cfg := s.Config
	c := s.paired(h, p, 0, n)
	if p == 0 {
		c = s.paired(h, 0, 0, n)
	}
	margin, dir := math.Abs(e.D)/2, math.Copysign(1, e.D)
	cmp := cfg.Rule.test(c.D, c.SE, n.DF, margin, dir)
	switch {
	case c.Pairs == 0 || (cmp.Outcome == Unknown && c.Pairs < cfg.MaxPairs && s.Jobs < cfg.MaxJobs):
		pairs := s.size(n, margin, c.Pairs)
		what := "the culprit is measured next to its parent"
		if c.Pairs == 0 {
			cmp = Comparison{}
		} else {
			what = fmt.Sprintf("next to its parent the culprit is unknown (%s): more pairs", pct(cmp.Change()))
		}
		s.record(h, cmp, Comparison{}, c.Pairs, what)
		s.request(h, p, pairs)
	case cmp.Outcome == Different:
		s.record(h, cmp, Comparison{}, c.Pairs, fmt.Sprintf("confirmed: %s against its parent %s", pct(cmp.Change()), rev.Short(s.Commits[p].SHA)))
		vsBad := cfg.Rule.test(e.D-c.D, math.Hypot(c.SE, e.SE), n.DF, margin, dir)
		if vsBad.Outcome == Different {
			s.Second = fmt.Sprintf("The culprit accounts for %s of the ends' %s: a second change lies after it", pct(cmp.Change()), pct(math.Expm1(e.D)))
		}
		s.Confirmed = true
	case cmp.Outcome == Same && c.Pairs < 2*cfg.InitialPairs && c.Pairs < cfg.MaxPairs && s.Jobs < cfg.MaxJobs:
		// Reopening the search is dear: believe "the same as its parent"
		// on more than one job's pairs.
		s.record(h, cmp, Comparison{}, c.Pairs, "next to its parent the culprit looks the same: more pairs before believing it")
		s.request(h, p, s.size(n, margin, c.Pairs))
	case cmp.Outcome == Same && s.Reopens < MaxReopens:
		s.Reopens++
		s.reopen(h, p, n, e, cmp)
	default:
		s.record(h, cmp, Comparison{}, c.Pairs, "next to its parent the culprit is not confirmed")
		s.finishUnconfirmed(fmt.Sprintf("measured next to its parent %s it moved %s over %d pairs, which does not confirm it", rev.Short(s.Commits[p].SHA), pct(cmp.Change()), c.Pairs))
	}
}

// reopen handles a culprit that its parent does not confirm: both sit at
// one level, the good one when their pooled pairs against the good end are
// nearer it; the verdict that disagrees is turned and the search goes on
// in the range that opens.
func (s *State) reopen(h, p int, n Noise, e estimate, cmp Comparison) {
	last := len(s.Commits) - 1
	mh, mp := s.paired(h, 0, 0, n), s.paired(p, 0, 0, n)
	level := (mh.D*float64(mh.Pairs) + mp.D*float64(mp.Pairs)) / float64(mh.Pairs+mp.Pairs)
	if p == 0 {
		level = 0
	}
	good := math.Abs(level) < math.Abs(e.D-level) && h != last
	if p != 0 && !good {
		s.Commits[p].Verdict = Bad
		s.Hi = p
		for s.Lo = p - 1; s.Lo > 0 && s.Commits[s.Lo].Verdict != Good; s.Lo-- {
		}
		s.record(h, cmp, Comparison{}, mh.Pairs, fmt.Sprintf("not confirmed: the same as its parent (%s), both at the bad level: the search reopens before %s", pct(cmp.Change()), rev.Short(s.Commits[p].SHA)))
		return
	}
	s.Commits[h].Verdict = Good
	s.Lo = h
	for s.Hi = h + 1; s.Hi < last && s.Commits[s.Hi].Verdict != Bad; s.Hi++ {
	}
	s.record(h, cmp, Comparison{}, mh.Pairs, fmt.Sprintf("not confirmed: the same as its parent (%s), both at the good level: the search reopens after it", pct(cmp.Change())))
}

// midpoint picks the unskipped commit strictly between Lo and Hi nearest
// their middle; −1 when there is none.
func (s *State) midpoint() int {
	best, bestDist := -1, math.Inf(1)
	mid := float64(s.Lo+s.Hi) / 2
	for i := s.Lo + 1; i < s.Hi; i++ {
		if s.Commits[i].Skip != "" {
			continue
		}
		if d := math.Abs(float64(i) - mid); d < bestDist {
			best, bestDist = i, d
		}
	}
	return best
}

// request issues a job, or finishes when the budget is spent.
func (s *State) request(i, ref, pairs int) {
	if s.Jobs >= s.Config.MaxJobs {
		s.finishNarrowed()
		return
	}
	s.Seq++
	s.Jobs++
	s.Pending = &Request{Seq: s.Seq, Index: i, SHA: s.Commits[i].SHA, Ref: ref, RefSHA: s.Commits[ref].SHA, Pairs: max(1, pairs)}
}

func (s *State) record(i int, vsGood, vsBad Comparison, pairs int, decision string) {
	c := s.Commits[i]
	med := 0.0
	if len(c.Values) > 0 {
		med = stats.Median(c.Values)
	}
	// JSON has no NaN or infinity: an undefined number is stored as 0.
	s.Steps = append(s.Steps, Step{Seq: s.Seq, Index: i, SHA: c.SHA, Pairs: pairs, Median: med,
		VsGood: vsGood.finite(), VsBad: vsBad.finite(), Decision: decision})
}

func (s *State) recordJudgement(i int, m estimate, j Judgement, decision string) {
	s.record(i, j.VsGood, j.VsBad, m.Pairs, decision)
}

// recordEnds records the ends' comparison on a row for each end.
func (s *State) recordEnds(e estimate, c Comparison, decision string) {
	s.record(0, Comparison{}, c, e.Pairs, decision)
	s.record(len(s.Commits)-1, c, Comparison{}, e.Pairs, decision)
}

// Steps is how many halvings a binary search over n commits takes at
// most: ⌈log₂ n⌉.
func Steps(n int) int {
	k := 0
	for 1<<k < n {
		k++
	}
	return k
}

// pct formats a relative change with its sign: "+18.2%".
func pct(r float64) string {
	if math.IsNaN(r) {
		return "n/a"
	}
	return fmt.Sprintf("%+.1f%%", 100*r)
}
