package main

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/cost"
	"github.com/perfgate/perfgate/internal/analysis/fleet"
	"github.com/perfgate/perfgate/internal/store"
)

func init() {
	register("usage", command{summary: "GPU-hours, jobs, baseline reuse and regressions caught, by repository, tier and week", run: runUsage})
}

// usageCacheNote is what the usage figures leave out.
const usageCacheNote = "Cache hits count baseline reuse only: runners do not report source-cache hits yet."

func runUsage(ctx context.Context, env *cliEnv, args []string) int {
	fs := env.flags("usage", "[--db DSN] [--repo OWNER/NAME] [--weeks N] [--json]")
	db := addStoreFlags(fs)
	repo := fs.String("repo", "", "one repository (default: all)")
	weeks := fs.Int("weeks", 8, "how many ISO weeks, this one included")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	fs.epilog = `GPU-hours sum every attempt's time on its card (claim to finish), lost attempts
included; jobs count the jobs with an attempt that ended in the week; baseline
reuse counts checks judged against a stored baseline instead of one measured
for them; regressions count the commits the gate called a regression, and
their cost is what those regressions would cost a month, had they shipped, at
the repository's declared price (cost: in perfgate.yml; docs/cost.md).
` + usageCacheNote + "\n"
	if code, ok := fs.parse(args); !ok {
		return code
	}
	if *weeks < 1 || fs.NArg() > 0 {
		fmt.Fprintln(env.stderr, "perfgate usage: --weeks must be at least 1 and no arguments are taken (perfgate usage -h)")
		return 3
	}
	st, err := db.open(ctx)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate usage: %v\n", err)
		return 3
	}
	defer st.Close()
	since := fleet.WeeksBack(time.Now(), *weeks)
	rows, err := st.Usage(ctx, store.UsageFilter{Repo: *repo, Since: since})
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate usage: %v\n", err)
		return 3
	}
	if *asJSON {
		if rows == nil {
			rows = []fleet.UsageRow{}
		}
		b, err := json.MarshalIndent(map[string]any{"since": since, "rows": rows, "note": usageCacheNote}, "", "  ")
		if err != nil {
			fmt.Fprintf(env.stderr, "perfgate usage: %v\n", err)
			return 3
		}
		fmt.Fprintln(env.stdout, string(b))
		return 0
	}
	if len(rows) == 0 {
		fmt.Fprintf(env.stdout, "No GPU time recorded since %s.\n", since.Format("2006-01-02"))
		return 0
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "WEEK\tREPOSITORY\tTIER\tGPU-HOURS\tJOBS\tBASELINE REUSE\tREGRESSIONS\tTHEIR COST A MONTH\t")
	var total fleet.UsageRow
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%d\t%d\t%d\t%s\t\n", r.Week, r.Repo, r.Tier, r.GPUHours, r.Jobs, r.BaselineReuse, r.Regressions, usdCell(r.RegressionUSDMonth))
		total.GPUHours += r.GPUHours
		total.Jobs += r.Jobs
		total.BaselineReuse += r.BaselineReuse
		total.Regressions += r.Regressions
		total.RegressionUSDMonth += r.RegressionUSDMonth
	}
	fmt.Fprintf(tw, "total\t\t\t%.2f\t%d\t%d\t%d\t%s\t\n", total.GPUHours, total.Jobs, total.BaselineReuse, total.Regressions, usdCell(total.RegressionUSDMonth))
	if err := tw.Flush(); err != nil {
		fmt.Fprintf(env.stderr, "perfgate usage: %v\n", err)
		return 3
	}
	fmt.Fprintln(env.stdout, usageCacheNote)
	return 0
}

// usdCell is a monthly figure, or "—" where nothing was priced.
func usdCell(v float64) string {
	if v == 0 {
		return "—"
	}
	return cost.USD(v)
}
