// Package gitbisect is `perfgate bisect run` under `git bisect run`: each
// invocation measures the checked-out commit next to the good commit,
// interleaved pair by pair in ABBA order with both engines started from
// their own checkouts, adds pairs until the bisect rule decides
// (internal/analysis/bisect's single step) or the budget ends, and answers
// good, bad or skip with the reason.
package gitbisect

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/analysis/bisect"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
)

// Answer is what one invocation tells git bisect.
type Answer int

// Answers; the command maps them to git bisect run's exit codes.
const (
	Good  Answer = iota // exit 0
	Bad                 // exit 1
	Skip                // exit 125: the commit cannot be built, started or measured, or its budget ended undecided
	Abort               // exit 128: the good or bad end cannot be measured, or there is nothing to bisect
)

func (a Answer) String() string {
	return [...]string{"good", "bad", "skip", "abort"}[a]
}

// Options say what to measure and how.
type Options struct {
	Plan   agentapi.Plan // the engine and workload; Repeats is one round's pairs
	Build  string        // shell command run in each checkout before its engine starts
	Metric string        // e.g. tpot_median
	// Direction is the way that counts as bad: +1 up, −1 down, 0 either.
	Direction float64
	// Config carries the rule (MinChange) and the budget: MaxPairs pairs
	// of this commit (and of the ends, measured once per bisect).
	Config bisect.Config
	// Bad is the bad end; "" takes git bisect's (the first commit its log
	// marked bad). With none, "same" means within MinChange of good.
	Bad string
	// Out gets one line per round and the answer; BuildOut the build's
	// output.
	Out, BuildOut io.Writer
	Log           zerolog.Logger
}

// Run measures the current checkout next to the good commit (a SHA) and
// answers. The ends' change, which sets the "same" margin and sizes the
// pairs, is measured on the first invocation of a bisect (the bad end next
// to the good, interleaved the same way) and kept in the git directory for
// the later ones.
func Run(ctx context.Context, o Options, good string) Answer {
	start := time.Now()
	name := ShortName(ctx)
	say := func(a Answer, format string, args ...any) Answer {
		fmt.Fprintf(o.Out, "perfgate bisect run: %s: "+format+" → %s (%s)\n", append([]any{name}, append(args, a, time.Since(start).Round(time.Second))...)...)
		return a
	}
	head, err := CurrentCheckout(ctx)
	if err != nil {
		return say(Abort, "%v", err)
	}
	if head.SHA == good {
		return say(Good, "the good commit itself")
	}
	goodCo, cleanup, err := addWorktree(ctx, head.Dir, good)
	if err != nil {
		return say(Abort, "check out the good commit %.7s: %v", good, err)
	}
	defer cleanup()
	if err := Build(ctx, o.Build, goodCo, o.BuildOut); err != nil {
		return say(Abort, "the good commit %.7s: %v", good, err)
	}

	ends, a, msg := o.ends(ctx, head, goodCo)
	if a != Good {
		return say(a, "%s", msg)
	}
	dir := o.Direction
	if ends != nil {
		dir = math.Copysign(1, bisect.DecideEnds(o.Config, *ends).D)
	}

	if err := Build(ctx, o.Build, head, o.BuildOut); err != nil {
		return say(Skip, "skip: %v", err)
	}
	iv := &interleaved{plan: o.Plan, log: o.Log, sides: [2]Checkout{goodCo, head}}
	defer iv.stop()
	var r bisect.Reading
	n := max(o.Plan.Repeats, bisect.StepMinPairs)
	for {
		if side, err := iv.pairs(ctx, &r, n, o.Metric); err != nil {
			if side == 0 {
				return say(Abort, "the good commit %.7s: %v", good, err)
			}
			return say(Skip, "skip: %v", err)
		}
		d := bisect.DecideStep(o.Config, r, ends, dir)
		line := o.describe(d, good, ends)
		switch {
		case d.Verdict == bisect.Good:
			return say(Good, "%s: %s", line, d.Reason)
		case d.Verdict == bisect.Bad:
			return say(Bad, "%s: %s", line, d.Reason)
		case d.More == 0:
			return say(Skip, "%s: %s: skip", line, d.Reason)
		}
		fmt.Fprintf(o.Out, "perfgate bisect run: %s: %s: %s\n", name, line, d.Reason)
		n = d.More
	}
}

// describe is a round's comparison: the change, its interval and the
// margin "same" must fall within.
func (o Options) describe(d bisect.StepDecision, good string, ends *bisect.Reading) string {
	s := fmt.Sprintf("%s %+.1f%% next to good %.7s over %d interleaved pairs (significance ±%.1f%%, pair spread %.1f%%",
		o.Metric, 100*d.Change(), good, d.Pairs, 100*math.Expm1(d.HalfWidth), 100*math.Expm1(d.Noise.Sigma))
	if ends != nil {
		s += fmt.Sprintf("; same within ±%.1f%%, half the ends' change", 100*math.Expm1(d.Margin))
	} else {
		s += fmt.Sprintf("; same within ±%.1f%%, --min-change", 100*math.Expm1(d.Margin))
	}
	return s + ")"
}

// endsFile is what the first invocation of a bisect keeps for the others.
type endsFile struct {
	Good, Bad, Metric string
	Pairs             bisect.Reading
}

// ends returns the bad end's pairs with the good end, measured now or by an
// earlier invocation of this bisect; nil when there is no bad end. An
// answer other than Good stops the invocation with msg.
func (o Options) ends(ctx context.Context, head, goodCo Checkout) (*bisect.Reading, Answer, string) {
	bad := o.Bad
	if bad == "" {
		bad = bisectBad(ctx)
	}
	if bad == "" {
		return nil, Good, ""
	}
	path, err := gitPath(ctx, filepath.Join("perfgate-bisect", fmt.Sprintf("ends-%.12s-%.12s-%s.json", goodCo.SHA, bad, o.Metric)))
	if err != nil {
		return nil, Abort, err.Error()
	}
	var kept endsFile
	if data, err := os.ReadFile(path); err == nil && json.Unmarshal(data, &kept) == nil && kept.Good == goodCo.SHA && kept.Bad == bad {
		d := bisect.DecideEnds(o.Config, kept.Pairs)
		fmt.Fprintf(o.Out, "perfgate bisect run: the ends (good %.7s, bad %.7s): %+.1f%% over %d pairs, measured by an earlier step\n", goodCo.SHA, bad, 100*d.Change(), d.Pairs)
		return &kept.Pairs, Good, ""
	}

	badCo, cleanup, err := addWorktree(ctx, head.Dir, bad)
	if err != nil {
		return nil, Abort, fmt.Sprintf("check out the bad commit %.7s: %v", bad, err)
	}
	defer cleanup()
	if err := Build(ctx, o.Build, badCo, o.BuildOut); err != nil {
		return nil, Abort, fmt.Sprintf("the bad commit %.7s: %v", bad, err)
	}
	iv := &interleaved{plan: o.Plan, log: o.Log, sides: [2]Checkout{goodCo, badCo}}
	defer iv.stop()
	var r bisect.Reading
	n := max(o.Plan.Repeats, bisect.StepConfig(o.Config).InitialPairs)
	for {
		if side, err := iv.pairs(ctx, &r, n, o.Metric); err != nil {
			which := map[int]string{0: "good", 1: "bad"}[side]
			return nil, Abort, fmt.Sprintf("measuring the ends: the %s commit: %v", which, err)
		}
		d := bisect.DecideEnds(o.Config, r)
		fmt.Fprintf(o.Out, "perfgate bisect run: the ends (good %.7s, bad %.7s): %s %+.1f%% over %d interleaved pairs (significance ±%.1f%%, pair spread %.1f%%): %s\n",
			goodCo.SHA, bad, o.Metric, 100*d.Change(), d.Pairs, 100*math.Expm1(d.HalfWidth), 100*math.Expm1(d.Noise.Sigma), d.Reason)
		switch {
		case d.Verdict == bisect.Bad && o.Direction != 0 && d.D*o.Direction < 0:
			return nil, Abort, fmt.Sprintf("the bad commit %.7s moved %s %+.1f%% the other way than --direction: nothing to bisect that way", bad, o.Metric, 100*d.Change())
		case d.Verdict == bisect.Bad:
			if err := save(path, endsFile{Good: goodCo.SHA, Bad: bad, Metric: o.Metric, Pairs: r}); err != nil {
				o.Log.Warn().Err(err).Msg("keep the ends' pairs for the next steps")
			}
			return &r, Good, ""
		case d.Verdict == bisect.Good:
			return nil, Abort, d.Reason
		case d.More == 0:
			return nil, Abort, d.Reason + ": there is no clear change to bisect (raise --max-pairs or reduce the noise)"
		}
		n = d.More
	}
}

func save(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
