package gate

import (
	"fmt"
	"math"
	"strings"

	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// World is what a real runner adds to a noise model. Each field is one of
// the ways the gate's promises broke outside the friendly model.
type World struct {
	// StartCV is the state of one engine start (what it allocated,
	// compiled, how its scheduler warmed), shared by the runs it serves.
	StartCV float64
	// RestartPerRun starts the engine for every run instead of the
	// agent's B | H H | B B | … order, in which neighbouring pairs share
	// starts.
	RestartPerRun bool
	// HeadCV is extra run-to-run noise of the head (candidate) only: a PR
	// that makes the engine less stable.
	HeadCV float64
	// HistoryCV, when > 0, is the run-to-run noise of the history: a
	// quieter card than today's.
	HistoryCV float64
	// HistoryCard, when set, is the card the history ran on (the job runs
	// on "sim-card").
	HistoryCard string
	// OutlierRuns whole runs per job are slow by OutlierSize (log):
	// every latency up, every throughput down.
	OutlierRuns int
	OutlierSize float64
	// Requests, when > 0, is the number of requests per run: TPOT
	// percentiles are computed from per-request values (a fixed prompt
	// set: each prompt's own length effect, per-run jitter and stalls)
	// instead of drawn as run values.
	Requests int
	// MissingRuns runs per job lack the regressed metric (a zero value).
	MissingRuns int
	// CVs are per-metric run-to-run coefficients of variation by result
	// key, from a noise profile; a key not listed takes the model's CV.
	CVs map[string]float64
}

// The job's card; a history from elsewhere carries another.
const simCard = "sim-card"

// Request-level model of the Requests stress: each prompt's log TPOT
// effect (a fixed dataset), each request's per-run jitter, and stalls.
const (
	simPromptSD = 0.35
	simJitterSD = 0.08
	simStallP   = 0.08
)

// newGate draws what one simulated PR's runs share: its prompt set.
func (s *simulator) newGate() {
	if s.cfg.World.Requests > 0 {
		s.prompts = make([]float64, s.cfg.World.Requests)
		for i := range s.prompts {
			s.prompts[i] = simPromptSD * s.rng.NormFloat64()
		}
	}
}

// history is the noise prior the gate gets: earlier stored sessions and,
// for an interleaved tier, earlier A/A interleaved jobs.
func (s *simulator) history() History {
	var h History
	s.inHistory = true
	defer func() { s.inHistory = false }()
	for i := 0; i < s.cfg.HistorySets; i++ {
		h.Sessions = append(h.Sessions, Session{Label: fmt.Sprintf("history %d", i+1), Runs: s.session(s.cfg.BaselineRuns, 0)})
		if s.cfg.Design == DesignInterleaved {
			h.Paired = append(h.Paired, s.pairSession(s.cfg.Runs, 0, fmt.Sprintf("h%d", i+1)))
		}
	}
	return h
}

// evidence is one simulated PR's growing evidence.
type evidence struct {
	s        *simulator
	delta    float64
	base     []*result.Result // stored: the baseline session
	cand     []*result.Result // stored: candidate runs, all sessions
	sessions []string
	pairs    []Pair // interleaved
	nSession int
	starts   int // engine starts spent on the PR's jobs
	runs     int // measured runs spent on the PR's jobs
}

func (s *simulator) newEvidence(delta float64) *evidence {
	ev := &evidence{s: s, delta: delta}
	if s.cfg.Design == DesignStored {
		ev.base = s.session(s.cfg.BaselineRuns, 0)
	}
	ev.add(s.cfg.Runs)
	return ev
}

// add measures n more candidate runs (pairs) in a new job, as an
// added-runs job or a retest does.
func (ev *evidence) add(n int) {
	ev.nSession++
	name := fmt.Sprint(ev.nSession)
	s := ev.s
	if s.cfg.Design == DesignStored {
		for _, r := range s.session(n, ev.delta) {
			ev.cand = append(ev.cand, r)
			ev.sessions = append(ev.sessions, name)
		}
		ev.runs += n
		ev.starts++
		if s.cfg.World.RestartPerRun {
			ev.starts += n - 1
		}
		return
	}
	ev.pairs = append(ev.pairs, s.pairSession(n, ev.delta, name)...)
	ev.runs += 2 * n
	ev.starts += n + 1
	if s.cfg.World.RestartPerRun {
		ev.starts += n - 1
	}
}

func (ev *evidence) size() int {
	if ev.s.cfg.Design == DesignStored {
		return len(ev.cand)
	}
	return len(ev.pairs)
}

func (ev *evidence) naive() (float64, float64) {
	if ev.s.cfg.Design == DesignStored {
		return ev.base[0].Metrics[ev.s.key], ev.cand[0].Metrics[ev.s.key]
	}
	return ev.pairs[0].Base.Metrics[ev.s.key], ev.pairs[0].Head.Metrics[ev.s.key]
}

func (ev *evidence) judge(tier config.Tier, opt Options) (*Report, error) {
	if ev.s.cfg.Design == DesignStored {
		opt.CandidateSessions = ev.sessions
		return Compare(ev.base, ev.cand, tier, opt)
	}
	return ComparePaired(ev.pairs, tier, opt)
}

// session makes n runs of one engine session (a stored baseline's or a
// candidate's job): a session shift shared by the runs, a random-walk
// drift from run to run, and each run's own noise. The regressed metric
// scales by 1+delta.
func (s *simulator) session(n int, delta float64) []*result.Result {
	st := s.newSessionState()
	st.start = s.newStart()
	bad := s.pick(n, s.cfg.World.OutlierRuns)
	gone := s.pick(n, s.cfg.World.MissingRuns)
	out := make([]*result.Result, n)
	for i := range out {
		if s.cfg.World.RestartPerRun && i > 0 {
			st.start = s.newStart()
		}
		out[i] = s.run(st, delta, delta != 0, bad[i], gone[i])
	}
	return out
}

// pairSession makes n base/head pairs in one job in the agent's order:
// pairs alternate B H, H B (ABBA), and a side's engine starts when the
// order changes side, so neighbouring pairs share a start (unless the
// world restarts per run). Seq-derived start numbers go on the pairs, as
// MakePairs gives them in production.
func (s *simulator) pairSession(n int, delta float64, name string) []Pair {
	st := s.newSessionState()
	bad := s.pick(2*n, s.cfg.World.OutlierRuns)
	gone := s.pick(2*n, s.cfg.World.MissingRuns)
	out := make([]Pair, n)
	side, startNo, seq := "", 0, 0
	next := func(head bool) (*result.Result, int) {
		sd := SideBase
		if head {
			sd = SideHead
		}
		if sd != side || s.cfg.World.RestartPerRun {
			side = sd
			startNo++
			st.start = s.newStart()
		}
		d := 0.0
		if head {
			d = delta
		}
		r := s.run(st, d, head, bad[seq], gone[seq])
		seq++
		return r, startNo
	}
	for i := range out {
		out[i] = Pair{Session: name, Index: i, HeadFirst: i%2 == 1}
		if i%2 == 1 {
			out[i].Head, out[i].HeadStart = next(true)
			out[i].Base, out[i].BaseStart = next(false)
		} else {
			out[i].Base, out[i].BaseStart = next(false)
			out[i].Head, out[i].HeadStart = next(true)
		}
	}
	return out
}

// pick marks k of n positions at random.
func (s *simulator) pick(n, k int) []bool {
	out := make([]bool, n)
	for _, i := range s.rng.Perm(n)[:min(k, n)] {
		out[i] = true
	}
	return out
}

// sessionState is what a session's runs share.
type sessionState struct {
	shared float64            // the session shift's part common to every metric
	own    map[string]float64 // its part per metric
	walk   float64            // the drift so far
	start  float64            // the current engine start's state
}

func (s *simulator) newSessionState() *sessionState {
	st := &sessionState{own: make(map[string]float64, len(simMetricKeys)+3)}
	if s.cfg.SessionCV > 0 {
		st.shared = s.rng.NormFloat64()
		for _, k := range simMetricKeys {
			st.own[k] = s.rng.NormFloat64()
		}
		for _, k := range []string{"output_throughput", "request_throughput", "total_token_throughput"} {
			st.own[k] = s.rng.NormFloat64()
		}
	}
	return st
}

func (s *simulator) newStart() float64 {
	if s.cfg.World.StartCV <= 0 {
		return 0
	}
	return s.cfg.World.StartCV * s.rng.NormFloat64()
}

// cv is the run-to-run CV of a result key under the model, the profile
// and, for history runs, the history's card.
func (s *simulator) cv(k string) float64 {
	if s.inHistory && s.cfg.World.HistoryCV > 0 {
		return s.cfg.World.HistoryCV
	}
	if v, ok := s.cfg.World.CVs[k]; ok {
		return v
	}
	return s.model.CV
}

// run is one run's values. A run's noise is half shared by its metrics
// (the card's state moves them together: latencies up, throughputs down)
// and half its own; so is the session shift. The engine start's state and
// an outlier move every metric together.
func (s *simulator) run(st *sessionState, delta float64, head, outlier, missing bool) *result.Result {
	if s.cfg.Drift > 0 {
		st.walk += s.cfg.Drift * s.rng.NormFloat64()
	}
	shared := s.noise()
	if s.rng.Float64() < s.model.OutlierProb {
		shared += s.model.OutlierShift
	}
	common := st.walk + st.start
	if outlier {
		common += s.cfg.World.OutlierSize
	}
	headZ := 0.0
	if head && !s.inHistory && s.cfg.World.HeadCV > 0 {
		headZ = s.cfg.World.HeadCV * s.rng.NormFloat64()
	}
	card := simCard
	if s.inHistory && s.cfg.World.HistoryCard != "" {
		card = s.cfg.World.HistoryCard
	}
	r := &result.Result{Metrics: make(map[string]float64, len(simMetrics)), Completed: 1000,
		Perfgate: &result.Section{Environment: result.Environment{GPUName: card}}}
	logf := func(k string) float64 {
		z := math.Sqrt(0.5)*shared + math.Sqrt(0.5)*s.noise()
		sess := s.cfg.SessionCV * (math.Sqrt(0.5)*st.shared + math.Sqrt(0.5)*st.own[k])
		return s.cv(k)*z + sess + common + headZ
	}
	for _, k := range simMetricKeys {
		r.Metrics[k] = simMetrics[k] * math.Exp(logf(k))
	}
	r.OutputThroughput = 5000 * math.Exp(-logf("output_throughput"))
	r.RequestThroughput = 40 * math.Exp(-logf("request_throughput"))
	r.TotalTokenThroughput = 45000 * math.Exp(-logf("total_token_throughput"))
	if s.cfg.World.Requests > 0 {
		s.requests(r, logf("median_tpot_ms"), delta)
	}
	if delta != 0 {
		if _, ok := r.Metrics[s.key]; ok {
			r.Metrics[s.key] *= 1 + delta
		}
	}
	if missing {
		r.Metrics[s.key] = 0
		if strings.Contains(s.key, "tpot") {
			r.Perfgate.TPOTs = nil
		}
	}
	return r
}

// requests replaces the run's TPOT values by per-request ones: the
// prompt's effect, the run's level, jitter and stalls; a regression of a
// TPOT metric slows every request.
func (s *simulator) requests(r *result.Result, level, delta float64) {
	for k := range r.Metrics {
		if strings.HasSuffix(k, "_tpot_ms") {
			delete(r.Metrics, k)
		}
	}
	scale := 1.0
	if strings.HasSuffix(s.key, "_tpot_ms") {
		scale = 1 + delta
	}
	t := make([]float64, len(s.prompts))
	for i, p := range s.prompts {
		x := p + level + simJitterSD*s.rng.NormFloat64()
		if s.rng.Float64() < simStallP {
			x += 0.3 + 0.7*s.rng.Float64()
		}
		t[i] = simMetrics["median_tpot_ms"] * math.Exp(x) * scale
	}
	r.Perfgate.TPOTs = t
}

// noise is a unit-variance draw from the model's distribution.
func (s *simulator) noise() float64 {
	if s.model.TailDF <= 2 {
		return s.rng.NormFloat64()
	}
	nu := s.model.TailDF
	chi := 0.0
	for range int(nu) {
		z := s.rng.NormFloat64()
		chi += z * z
	}
	t := s.rng.NormFloat64() / math.Sqrt(chi/nu)
	return t / math.Sqrt(nu/(nu-2))
}
