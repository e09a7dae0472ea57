// Package judge is the gate's one decision path: it takes everything a
// finished check has to go on — the tier, the candidate's runs (plain,
// interleaved pairs or a nightly matrix's cells), the baseline compared
// with, the noise history the check may use, the look budget and settle
// budget spent so far — as one Input, and returns one Decision: the
// verdict document to publish, runs to add, the last verdict standing, or
// why there is nothing to compare. It reads no store and calls no GitHub:
// the server's dispatch loads an Input from the store and stores the
// Decision; `perfgate compare` builds the same Input from files. Both
// therefore decide the same runs the same way, byte for byte.
package judge

import (
	"time"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// Input is one judgement to make. Exactly one of Runs (with Base or
// MeasuredBase), Interleaved and Cells carries the candidate's evidence.
type Input struct {
	Tier config.Tier
	// Key is the baseline and look-budget key: the tier's name (a matrix
	// cell's key is "<tier>/<cell>", see CellKey).
	Key string
	// Job is the job whose end triggered the judgement; a check with no
	// measured runs and no recorded failure names it.
	Job Ended

	// Runs is what the check's jobs measured (a plain plan).
	Runs Evidence
	// Base is the stored baseline compared with; nil when none is stored
	// (the decision is then to measure the base commit).
	Base *Base
	// MeasuredBase, when set, is the base commit's job that was measured
	// because no baseline was stored: its runs are the baseline, and are
	// promoted as the first one (Decision.Promotions).
	MeasuredBase *Evidence

	// Interleaved is an interleaved plan's runs, judged pair by pair.
	Interleaved *Interleaved

	// Cells are a nightly matrix's cells, each judged against its own
	// baseline; the worst cell's verdict is the check's.
	Cells []Cell

	// History is the noise history of the stored baselines of Key, other
	// than the one compared with.
	History gate.History
	// Looks is the look budget the check's row stored for Key (zero at
	// the first look).
	Looks gate.Looks
	// Earlier are the budgets other commits of the same pull request left
	// for Key (their checks of the tier): a commit that changes no file
	// (same source tree) continues the newest of them, the first on a tie
	// (see prLooks). Only read when Looks has none spent.
	Earlier []EarlierLooks
	// Settle is the tier's settle budget and what the check's jobs spent.
	Settle Settle
	// Stored says the check already holds a verdict (which stands when the
	// plan's looks are spent and nothing new was measured).
	Stored bool
	// DefaultBranch says the runs measured the default branch: their
	// medians go on the trend (Decision.Trends).
	DefaultBranch bool
}

// Ended is how a job ended.
type Ended struct {
	ID            int64
	Status        string
	FailureReason string
}

// Evidence is what a set of jobs measured: the runs the gate can use, the
// session (job) each ran in, the reasons jobs failed, and the runs that
// cannot be judged.
type Evidence struct {
	Runs     []*result.Result
	Sessions []string // parallel to Runs; nil: one session
	Failures []string
	Bad      []string
}

// Base is a stored baseline: its runs and its version (0: not stored).
type Base struct {
	Runs    []*result.Result
	Version int
}

// Interleaved is what interleaved jobs measured: each run with its side and
// pair, the order each job ran its sides in, and the commits. Pairs, when
// set, are already paired (result files that carry no place in a job, see
// PairFiles) and Runs is not read.
type Interleaved struct {
	Runs      []gate.SidedRun
	Pairs     []gate.Pair
	PairNotes []string
	Orders    []string          // per job: "job 12: B H H B …"
	Commits   map[string]string // side → commit
	Failures  []string
	Bad       []string
	// History is the runs of the repository's latest earlier interleaved
	// jobs under the same load, newest first, one slice a job: the first
	// PairHistoryJobs of them that pair are the noise prior.
	History [][]gate.SidedRun
}

// Cell is one cell of a nightly matrix.
type Cell struct {
	Label   string
	Job     int64 // the cell's first job (its trend points name it)
	Runs    Evidence
	Base    *Base // nil: no baseline yet; the runs are promoted as the first
	History gate.History
	Looks   gate.Looks
}

// EarlierLooks is the look budget an earlier commit's check left.
type EarlierLooks struct {
	SourceTree string
	Looks      gate.Looks
	UpdatedAt  time.Time // the newest wins
}

// Outcome is what a Decision asks the caller to do.
type Outcome string

const (
	// Publish: store Report as the check's verdict.
	Publish Outcome = "publish"
	// Extend: add More runs (pairs) on the same card; Looks is the look
	// just taken.
	Extend Outcome = "extend"
	// Stands: the plan's looks are spent and nothing new was measured;
	// the stored verdict stands.
	Stands Outcome = "stands"
	// Broken: nothing to compare; Reasons say why.
	Broken Outcome = "broken"
	// MeasureBase: no baseline is stored; measure the base commit.
	MeasureBase Outcome = "measure_base"
)

// Decision is the judgement of an Input.
type Decision struct {
	Outcome Outcome
	// Report is the verdict document (Publish), merged over the cells for
	// a matrix; for Extend, the look just taken (inconclusive).
	Report   *gate.Report
	Env      *result.Environment
	Notes    []string
	Looks    map[string]gate.Looks
	Settings *result.SettingsDiff
	// More is the runs (pairs) to add (Extend).
	More int
	// Reasons and RunnerFault say why there is nothing to compare
	// (Broken): a fault only of the runner (an agent lost) is neutral.
	Reasons     []string
	RunnerFault bool
	// Key is the budget key whose verdict stands (Stands).
	Key string
	// Trends are the medians to record, Promotions the runs to promote as
	// a first baseline; the caller stores both whatever the outcome, with
	// the outcome's step.
	Trends     []Trend
	Promotions []Promotion
}

// Trend is a set of default-branch runs whose medians go on the trend.
type Trend struct {
	Key  string
	Job  int64
	Runs []*result.Result
}

// Promotion is runs to promote as the first baseline of Key. At is the
// index of the note in Decision.Notes (Publish) or Decision.Reasons
// (Broken) that says how the promotion went — the caller knows, once it
// has checked the runs under the baseline rules — and -1 when the outcome
// has no place for it.
type Promotion struct {
	Key   string
	Label string // the matrix cell; "" for the base commit of a check
	Runs  []*result.Result
	At    int
}

// Judge decides one Input.
func Judge(in Input) Decision {
	switch {
	case len(in.Cells) > 0:
		return judgeMatrix(in)
	case in.Interleaved != nil:
		return judgePaired(in)
	}
	return judgeRuns(in)
}

// CellKey is the baseline and trend key of a matrix cell: the tier, or
// "<tier>/<cell>".
func CellKey(tier, cell string) string {
	if cell == "" {
		return tier
	}
	return tier + "/" + cell
}
