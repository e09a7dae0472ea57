// Package bisect finds the commit that changed a benchmark metric between a
// good and a bad commit, the way Chromium's Pinpoint does: measure the ends,
// then midpoints, comparing each measured commit with both ends by a
// three-outcome rule (same / different / unknown → measure more), and narrow
// to one commit within a budget of GPU jobs.
//
// The engine is pure. A State holds the ordered commits, every run's value
// and the decisions so far; Next says which commit to measure and how many
// runs, Observe and Fail feed the answer back. The State is plain JSON, so a
// server persists it between GPU jobs and resumes after a restart; Run
// drives it with a Measurer for callers that can wait for each measurement.
package bisect

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/perfgate/perfgate/internal/stats"
)

// StateVersion is the version of the State format this code writes.
const StateVersion = 1

// Defaults of a Config.
const (
	DefaultInitialRuns = 3  // a quick-tier job's repeats
	DefaultAddRuns     = 3  // runs added while a comparison is unknown
	DefaultMaxRuns     = 12 // per commit
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
	// InitialRuns is the runs of a commit's first job; AddRuns of each
	// later one; MaxRuns caps a commit's runs.
	InitialRuns int `json:"initial_runs"`
	AddRuns     int `json:"add_runs"`
	MaxRuns     int `json:"max_runs"`
	// MaxJobs caps the GPU jobs of the whole bisect; 0 is
	// 4·⌈log2 N⌉ + 8 for N commits after the good one.
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
	// Values holds one metric value per measured run.
	Values []float64 `json:"values,omitempty"`
	// Skip says why the commit could not be built or measured (git
	// bisect's exit 125); a skipped commit is never measured again.
	Skip    string  `json:"skip,omitempty"`
	Verdict Verdict `json:"verdict,omitempty"`
}

// Request asks for runs of one commit: one GPU job.
type Request struct {
	// Seq numbers the bisect's requests from 1. With the bisect's id it is
	// the job's idempotency key: a server that restarts between enqueueing
	// and observing finds its job again instead of queueing a second.
	Seq   int    `json:"seq"`
	Index int    `json:"index"` // in State.Commits: 0 is the good end
	SHA   string `json:"sha"`
	Runs  int    `json:"runs"`
}

// Step is one decision, in order: the evidence a report shows.
type Step struct {
	Seq    int     `json:"seq"` // jobs issued when it was taken
	Index  int     `json:"index"`
	SHA    string  `json:"sha"`
	Runs   int     `json:"runs"`
	Median float64 `json:"median"`
	// VsGood and VsBad are the comparisons with the ends; for the ends'
	// own step VsBad is the good-against-bad comparison.
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
	// Lo is the newest commit known good, Hi the oldest known bad.
	Lo int `json:"lo"`
	Hi int `json:"hi"`
	// Ends is the good-against-bad outcome once it is different.
	Ends Outcome `json:"ends,omitempty"`
	// Current is the commit being decided; −1 for none.
	Current   int      `json:"current"`
	Confirmed bool     `json:"confirmed,omitempty"`
	Pending   *Request `json:"pending,omitempty"`
	Seq       int      `json:"seq"`
	Jobs      int      `json:"jobs"`
	Steps     []Step   `json:"steps"`
	Forced    int      `json:"forced,omitempty"`
	Between   []string `json:"between,omitempty"` // commits that differ from both ends
	Second    string   `json:"second,omitempty"`  // how the culprit compares with the bad end
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
		c.Values = append([]float64(nil), c.Values...)
		c.Verdict, c.Skip = "", ""
		s.Commits[i] = c
	}
	return s, nil
}

func (c Config) withDefaults(n int) Config {
	c.Rule = c.Rule.withDefaults()
	if c.InitialRuns < 2 {
		c.InitialRuns = DefaultInitialRuns
	}
	if c.AddRuns < 1 {
		c.AddRuns = DefaultAddRuns
	}
	if c.MaxRuns < c.InitialRuns {
		c.MaxRuns = max(DefaultMaxRuns, c.InitialRuns)
	}
	if c.MaxJobs <= 0 {
		c.MaxJobs = 4*ceilLog2(n) + 8
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
		return nil, fmt.Errorf("bisect state version %d: this perfgate reads version %d", s.Version, StateVersion)
	}
	n := len(s.Commits)
	if n < 2 || s.Lo < 0 || s.Hi >= n || s.Lo >= s.Hi || s.Current >= n {
		return nil, fmt.Errorf("bisect state is inconsistent (%d commits, lo %d, hi %d, current %d)", n, s.Lo, s.Hi, s.Current)
	}
	if s.Pending != nil && (s.Pending.Index < 0 || s.Pending.Index >= n) {
		return nil, fmt.Errorf("bisect state's pending request names commit %d of %d", s.Pending.Index, n)
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

// Observe records the runs of the pending request: one positive value per
// run. A request that is not the pending one is ErrStale.
func (s *State) Observe(req Request, values []float64) error {
	if err := s.pending(req); err != nil {
		return err
	}
	if len(values) == 0 {
		return fmt.Errorf("observe %s: no values: a job that measured nothing is a failure (Fail)", short(req.SHA))
	}
	for _, v := range values {
		if !(v > 0) || math.IsInf(v, 1) {
			return fmt.Errorf("observe %s: value %v: bisect compares positive metric values", short(req.SHA), v)
		}
	}
	c := &s.Commits[req.Index]
	c.Values = append(c.Values, values...)
	s.Pending = nil
	return nil
}

// Fail records that the pending request's commit cannot be built or
// measured: it is skipped, as git bisect skips on exit 125.
func (s *State) Fail(req Request, reason string) error {
	if err := s.pending(req); err != nil {
		return err
	}
	if reason == "" {
		reason = "could not be measured"
	}
	c := &s.Commits[req.Index]
	c.Skip = reason
	s.Pending = nil
	if req.Index == s.Current {
		s.Current = -1
		s.record(req.Index, Comparison{}, Comparison{}, "skipped: "+reason)
	}
	return nil
}

func (s *State) pending(req Request) error {
	if s.Pending == nil || s.Pending.Seq != req.Seq || s.Pending.SHA != req.SHA {
		return fmt.Errorf("%w: request %d for %s", ErrStale, req.Seq, short(req.SHA))
	}
	return nil
}

// step takes one decision: it issues a request, finishes, or moves the
// bisect on. Each call either sets Pending or Result or changes Lo, Hi,
// Current, Ends or Confirmed, so Next's loop ends.
func (s *State) step() {
	last := len(s.Commits) - 1
	good, bad := &s.Commits[0], &s.Commits[last]
	cfg := s.Config
	for _, end := range []*Commit{good, bad} {
		if end.Skip != "" {
			s.finish(EndFailed, fmt.Sprintf("The %s end %s could not be measured (%s), so there is nothing to compare against: fix it or choose another %s commit.",
				s.endName(end), short(end.SHA), end.Skip, s.endName(end)))
			return
		}
	}
	for _, i := range []int{0, last} {
		if n := len(s.Commits[i].Values); n < cfg.InitialRuns {
			s.request(i, cfg.InitialRuns-n)
			return
		}
	}

	if s.Ends != Different {
		c := cfg.Rule.CompareEnds(good.Values, bad.Values, s.others(0, last)...)
		switch c.Outcome {
		case Different:
			s.Ends = Different
			good.Verdict, bad.Verdict = Good, Bad
			s.recordEnds(c, fmt.Sprintf("the ends differ by %s: bisect", pct(c.Change())))
		case Same:
			// "Nothing to bisect" ends the bisect: claim it on more
			// than one job's runs at each end.
			if i := s.fewerRuns(0, last); i >= 0 && len(s.Commits[i].Values) < 2*cfg.InitialRuns {
				s.record(i, Comparison{}, c, "the ends look the same: more runs before saying so")
				s.request(i, cfg.AddRuns)
				return
			}
			s.recordEnds(c, "the ends are the same")
			s.finish(NoDifference, fmt.Sprintf("%s does not differ between %s and %s (%s, within ±%s): there is no change to bisect.",
				cfg.Metric, short(good.SHA), short(bad.SHA), pct(c.Change()), pct(cfg.Rule.MinChange)))
		default:
			if i := s.fewerRuns(0, last); i >= 0 {
				s.record(i, Comparison{}, c, "the ends' difference is unknown: more runs")
				s.request(i, cfg.AddRuns)
				return
			}
			s.recordEnds(c, "the ends' difference is unknown at the run cap")
			s.finish(Unclear, fmt.Sprintf("%s changed by %s between %s and %s, which %d runs each cannot tell from noise: there is no clear change to bisect (raise the run cap or reduce the noise).",
				cfg.Metric, pct(c.Change()), short(good.SHA), short(bad.SHA), cfg.MaxRuns))
		}
		return
	}

	if s.Current >= 0 {
		s.decide(s.Current)
		return
	}
	if m := s.midpoint(); m >= 0 {
		s.Current = m
		if n := len(s.Commits[m].Values); n < cfg.InitialRuns {
			s.request(m, cfg.InitialRuns-n)
		}
		return
	}
	if !s.Confirmed {
		s.confirm()
		return
	}
	s.finishNarrowed()
}

// decide judges the current commit and moves Lo or Hi, or asks for runs.
// "Good" is every commit already judged good, not the good end alone: they
// are at its level, and pooling them makes the reference sharper with each
// decision, so one unlucky set of runs at the good end does not bias every
// later comparison. "Bad" stays the bad end: with two changes, the commits
// judged bad are not all at one level.
func (s *State) decide(i int) {
	last := len(s.Commits) - 1
	c := &s.Commits[i]
	// A commit whose runs disagree among themselves far more than every
	// other commit's do was measured while something disturbed the
	// machine: its mean says little, and the pooled noise would make it
	// look precise. It is measured again before it is judged.
	if ratio, ok := s.disturbed(i); ok && len(c.Values) < s.Config.MaxRuns && s.Jobs < s.Config.MaxJobs {
		s.record(i, Comparison{}, Comparison{}, fmt.Sprintf("its runs disagree (spread %.1f× the bisect's run-to-run noise): %d more runs before judging it", ratio, s.Config.AddRuns))
		s.request(i, s.Config.AddRuns)
		return
	}
	j := s.Config.Rule.judge(s.noise(), logs(s.goodGroup()), logs(c.Values), logs(s.Commits[last].Values), 0)
	verdict, how := j.Verdict, string(j.Verdict)
	// A commit between the ends' levels is either a second change or an
	// unlucky set of runs near the threshold: believe it only on more runs.
	if j.Between && len(c.Values) < 2*s.Config.InitialRuns && len(c.Values) < s.Config.MaxRuns && s.Jobs < s.Config.MaxJobs {
		s.record(i, j.VsGood, j.VsBad, fmt.Sprintf("differs from both ends: %d more runs before believing it", s.Config.AddRuns))
		s.request(i, s.Config.AddRuns)
		return
	}
	if verdict == Undecided {
		if t := s.moreRunsFor(i); t >= 0 {
			s.record(i, j.VsGood, j.VsBad, fmt.Sprintf("unknown: %d more runs of %s", s.Config.AddRuns, short(s.Commits[t].SHA)))
			s.request(t, s.Config.AddRuns)
			return
		}
		if s.Jobs >= s.Config.MaxJobs {
			s.record(i, j.VsGood, j.VsBad, "unknown, and the job budget is spent")
			s.finishNarrowed()
			return
		}
		// Both at the cap: the nearer end, said so.
		verdict = Good
		if math.Abs(j.VsGood.D) > math.Abs(j.VsBad.D) {
			verdict = Bad
		}
		how = fmt.Sprintf("%s: nearer the %s end (unknown at %d runs)", verdict, verdict, s.Config.MaxRuns)
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
	s.record(i, j.VsGood, j.VsBad, how)
}

// disturbedP is the significance at which a commit's run-to-run spread is
// taken to exceed the noise pooled over the other commits (an F test):
// strict, so an undisturbed bisect almost never pays for it.
const disturbedP = 0.001

// disturbed reports whether commit i's runs spread significantly more than
// the other commits' pooled noise, and by what factor (standard
// deviations).
func (s *State) disturbed(i int) (float64, bool) {
	v := logs(s.Commits[i].Values)
	n := s.Config.Rule.Noise(logsAll(s.others(i))...)
	if len(v) < 3 || math.IsNaN(n.Sigma) || n.Sigma <= 0 || n.DF < 4 {
		return 0, false
	}
	d1 := float64(len(v) - 1)
	f := stats.Variance(v) / (n.Sigma * n.Sigma)
	// P(F(d1, df) > f) = I_{df/(df+d1·f)}(df/2, d1/2).
	p := stats.RegIncBeta(n.DF/2, d1/2, n.DF/(n.DF+d1*f))
	return math.Sqrt(f), p < disturbedP
}

// confirm compares the culprit with the bad end: a culprit that differs from
// it leaves a second change after it. Runs are added only while the
// estimate says such a change is there.
func (s *State) confirm() {
	last := len(s.Commits) - 1
	h := s.Hi
	if h == last || len(s.Commits[h].Values) == 0 || s.Hi-s.Lo > 1 {
		s.Confirmed = true
		return
	}
	cfg := s.Config
	g, c, b := logs(s.goodGroup()), logs(s.Commits[h].Values), logs(s.Commits[last].Values)
	delta := mean(b) - mean(g)
	cmp := cfg.Rule.Compare(c, b, s.noise(), math.Abs(delta)/2, math.Copysign(1, delta))
	switch {
	case cmp.Outcome == Different:
		s.Second = fmt.Sprintf("The culprit differs from the bad end %s by %s: a second change lies between them", short(s.Commits[last].SHA), pct(cmp.Change()))
	case cmp.Outcome == Same, math.Abs(cmp.D) < math.Log1p(cfg.Rule.MinChange):
		// One change explains the ends: nothing to add.
	default:
		if t := s.fewerRuns(h, last); t >= 0 && s.Jobs < cfg.MaxJobs {
			s.record(h, Comparison{}, cmp, fmt.Sprintf("culprit against the bad end unknown (%s): %d more runs of %s", pct(cmp.Change()), cfg.AddRuns, short(s.Commits[t].SHA)))
			s.request(t, cfg.AddRuns)
			return
		}
		s.Second = fmt.Sprintf("Whether the culprit accounts for the whole change is unknown (the bad end is %s from it)", pct(cmp.Change()))
	}
	s.Confirmed = true
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

// fewerRuns returns whichever of a and b has fewer runs and is under the
// cap (a on a tie); −1 when both are at it.
func (s *State) fewerRuns(a, b int) int {
	na, nb := len(s.Commits[a].Values), len(s.Commits[b].Values)
	okA, okB := na < s.Config.MaxRuns, nb < s.Config.MaxRuns
	switch {
	case okA && (!okB || na <= nb):
		return a
	case okB:
		return b
	}
	return -1
}

// request issues a job, or finishes when the budget is spent.
func (s *State) request(i, runs int) {
	if s.Jobs >= s.Config.MaxJobs {
		s.finishNarrowed()
		return
	}
	runs = min(runs, s.Config.MaxRuns-len(s.Commits[i].Values))
	if runs < 1 {
		runs = 1
	}
	s.Seq++
	s.Jobs++
	s.Pending = &Request{Seq: s.Seq, Index: i, SHA: s.Commits[i].SHA, Runs: runs}
}

// others is every commit's values except those of the given indices: they
// join the noise estimate.
func (s *State) others(except ...int) [][]float64 {
	var out [][]float64
outer:
	for i, c := range s.Commits {
		for _, e := range except {
			if i == e {
				continue outer
			}
		}
		if len(c.Values) >= 2 {
			out = append(out, c.Values)
		}
	}
	return out
}

// noise pools the run-to-run spread of every commit measured.
func (s *State) noise() Noise {
	return s.Config.Rule.Noise(logsAll(s.others())...)
}

// goodGroup is the runs of every commit judged good, the good end first.
func (s *State) goodGroup() []float64 {
	var out []float64
	for _, c := range s.Commits {
		if c.Verdict == Good {
			out = append(out, c.Values...)
		}
	}
	return out
}

// moreRunsFor picks who gets runs while commit i's comparison with the
// good group is unknown: i, or the good end while the whole group has fewer
// runs than i; −1 when neither may have more.
func (s *State) moreRunsFor(i int) int {
	ni, ng := len(s.Commits[i].Values), len(s.goodGroup())
	okI, okG := ni < s.Config.MaxRuns, len(s.Commits[0].Values) < s.Config.MaxRuns
	switch {
	case okI && (!okG || ni <= ng):
		return i
	case okG:
		return 0
	}
	return -1
}

func (s *State) record(i int, vsGood, vsBad Comparison, decision string) {
	c := s.Commits[i]
	med := 0.0
	if len(c.Values) > 0 {
		med = stats.Median(c.Values)
	}
	// JSON has no NaN or infinity: an undefined number is stored as 0.
	s.Steps = append(s.Steps, Step{Seq: s.Seq, Index: i, SHA: c.SHA, Runs: len(c.Values), Median: med,
		VsGood: vsGood.finite(), VsBad: vsBad.finite(), Decision: decision})
}

// recordEnds records the ends' comparison on a row for each end.
func (s *State) recordEnds(c Comparison, decision string) {
	s.record(0, Comparison{}, c, decision)
	s.record(len(s.Commits)-1, c, Comparison{}, decision)
}

func (s *State) endName(c *Commit) string {
	if c == &s.Commits[0] {
		return "good"
	}
	return "bad"
}

func logsAll(vs [][]float64) [][]float64 {
	out := make([][]float64, len(vs))
	for i, v := range vs {
		out[i] = logs(v)
	}
	return out
}

func ceilLog2(n int) int {
	k := 0
	for 1<<k < n {
		k++
	}
	return k
}

func short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}

// pct formats a relative change with its sign: "+18.2%".
func pct(r float64) string {
	if math.IsNaN(r) {
		return "n/a"
	}
	return fmt.Sprintf("%+.1f%%", 100*r)
}
