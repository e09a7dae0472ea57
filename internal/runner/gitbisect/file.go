package gitbisect

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/perfgate/perfgate/internal/analysis/bisect"
	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/analysis/stats"
)

// RunAgainstFiles judges the current checkout against runs measured earlier
// (bisect measure's files; bad may be ""): not drift-proof, and says so.
// It measures rounds of the plan's repeats up to Config.MaxPairs runs.
func RunAgainstFiles(ctx context.Context, o Options, goodPath, badPath string) Answer {
	name := ShortName(ctx)
	good, err := ReferenceValues(goodPath, o.Metric)
	if err != nil {
		fmt.Fprintf(o.Out, "perfgate bisect run: --good: %v\n", err)
		return Abort
	}
	var bad []float64
	if badPath != "" {
		if bad, err = ReferenceValues(badPath, o.Metric); err != nil {
			fmt.Fprintf(o.Out, "perfgate bisect run: --bad: %v\n", err)
			return Abort
		}
	}
	limit := bisect.StepConfig(o.Config).MaxPairs
	fmt.Fprintf(o.Out, "perfgate bisect run: %s: judged against runs measured earlier (%s): a machine that drifted since makes it look changed; --good COMMIT measures both now, interleaved\n", name, goodPath)
	co, err := CurrentCheckout(ctx)
	if err == nil {
		err = Build(ctx, o.Build, co, o.BuildOut)
	}
	var s *Session
	if err == nil {
		s, err = Start(ctx, o.Plan, co, o.Log)
	}
	if err != nil {
		fmt.Fprintf(o.Out, "perfgate bisect run: %s: skip: %v\n", name, err)
		return Skip
	}
	defer s.Stop()
	var values []float64
	rule := o.Config.Rule
	for {
		runs, err := s.Measure(ctx, max(1, min(o.Plan.Repeats, limit-len(values))))
		var vs []float64
		if err == nil {
			vs, err = bisect.RunValues(runs, o.Metric)
		}
		if err != nil {
			fmt.Fprintf(o.Out, "perfgate bisect run: %s: skip: %v\n", name, err)
			return Skip
		}
		values = append(values, vs...)
		j := rule.JudgeToward(good, values, o.Direction)
		if len(bad) > 0 {
			j = rule.Judge(good, values, bad)
		}
		fmt.Fprintf(o.Out, "perfgate bisect run: %s: %s\n", name, describeJudgement(o.Metric, good, values, bad, j))
		switch {
		case j.Verdict == bisect.Good:
			return Good
		case j.Verdict == bisect.Bad:
			return Bad
		case len(values) >= limit:
			fmt.Fprintf(o.Out, "perfgate bisect run: %s: still unknown after %d runs: skip\n", name, len(values))
			return Skip
		}
	}
}

// ReferenceValues reads a reference file's runs and returns each run's
// value of metric.
func ReferenceValues(path, metric string) ([]float64, error) {
	runs, err := gate.LoadRuns(path)
	if err != nil {
		return nil, err
	}
	out, err := bisect.RunValues(runs, metric)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(out) < 2 {
		return nil, fmt.Errorf("%s: %d run(s); measure at least 2 (perfgate bisect measure makes the tier's repeats)", path, len(out))
	}
	return out, nil
}

func describeJudgement(metric string, good, values, bad []float64, j bisect.Judgement) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s median %.4g over %d runs; good %.4g: %+.1f%% %s", metric, stats.Median(values), len(values),
		stats.Median(good), 100*j.VsGood.Change(), j.VsGood.Outcome)
	if len(bad) > 0 {
		fmt.Fprintf(&b, "; bad %.4g: %+.1f%% %s", stats.Median(bad), 100*math.Expm1(-j.VsBad.D), j.VsBad.Outcome)
	}
	fmt.Fprintf(&b, " → %s", j.Verdict)
	if j.Between {
		b.WriteString(" (between the good and bad levels: more than one change)")
	}
	return b.String()
}
