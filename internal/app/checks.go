package app

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/go-github/v62/github"
)

// Verdict is perfgate's judgement of one run, mapped to a check conclusion.
type Verdict string

const (
	VerdictPass         Verdict = "pass"
	VerdictWarning      Verdict = "warning"      // regression, not yet escalated
	VerdictEscalated    Verdict = "escalated"    // unresolved past escalate_after
	VerdictInconclusive Verdict = "inconclusive" // too noisy to call
	VerdictSkipped      Verdict = "skipped"      // nothing relevant changed
	VerdictConfigError  Verdict = "config_error" // .github/perfgate.yml is broken
	VerdictWaiting      Verdict = "waiting"      // fork PR waits for a maintainer
	VerdictError        Verdict = "error"        // perfgate itself failed
)

// Conclusion is the check run conclusion for v. For required checks GitHub
// counts neutral and skipped as passing, so a warning is neutral and only an
// escalated regression blocks.
func Conclusion(v Verdict) string {
	switch v {
	case VerdictPass:
		return "success"
	case VerdictWarning, VerdictInconclusive:
		return "neutral"
	case VerdictSkipped:
		return "skipped"
	case VerdictWaiting:
		return "action_required"
	default: // escalated, config error, perfgate error: fail safe
		return "failure"
	}
}

// CheckName is the check run name of a tier, e.g. "perfgate / quick".
func CheckName(t Tier) string { return "perfgate / " + string(t) }

// TierFromCheckName parses a name CheckName made.
func TierFromCheckName(name string) (Tier, bool) {
	t, ok := strings.CutPrefix(name, "perfgate / ")
	switch Tier(t) {
	case TierQuick, TierMerge, TierNightly:
		return Tier(t), ok
	}
	return "", false
}

// Output is a check run's title and markdown body.
type Output struct {
	Title   string
	Summary string
	Text    string
}

// Checks creates and updates perfgate's check runs through go-github.
type Checks struct {
	// DetailsURL, when set, links each run to the perfgate dashboard.
	DetailsURL string
	// Details, when set, is each run's own "Details" link (the dashboard's
	// page of that check run); it wins over DetailsURL.
	Details func(repo, headSHA string, tier Tier) string
}

// maxOutput is GitHub's limit on output.summary and output.text, in characters.
const maxOutput = 65535

// Queue creates a queued run for tier on headSHA. pr (0 for none) travels in
// external_id because check_run.pull_requests is empty for forks.
func (c Checks) Queue(ctx context.Context, client *github.Client, owner, repo string, tier Tier, headSHA string, pr int, out Output) (int64, error) {
	opts := github.CreateCheckRunOptions{
		Name:       CheckName(tier),
		HeadSHA:    headSHA,
		Status:     github.String("queued"),
		ExternalID: externalID(pr),
		Output:     out.gh(),
	}
	c.details(&opts.DetailsURL, owner+"/"+repo, headSHA, tier)
	run, _, err := client.Checks.CreateCheckRun(ctx, owner, repo, opts)
	if err != nil {
		return 0, fmt.Errorf("create %s check run on %s/%s@%s: %w", opts.Name, owner, repo, short(headSHA), err)
	}
	return run.GetID(), nil
}

// Start marks a run in_progress.
func (c Checks) Start(ctx context.Context, client *github.Client, owner, repo string, id int64, tier Tier, out Output) error {
	opts := github.UpdateCheckRunOptions{
		Name:   CheckName(tier), // go-github v62 sends name even when empty: always set it
		Status: github.String("in_progress"),
		Output: out.gh(),
	}
	if _, _, err := client.Checks.UpdateCheckRun(ctx, owner, repo, id, opts); err != nil {
		return fmt.Errorf("start check run %d: %w", id, err)
	}
	return nil
}

// Complete concludes an existing run with v.
func (c Checks) Complete(ctx context.Context, client *github.Client, owner, repo string, id int64, tier Tier, v Verdict, out Output) error {
	opts := github.UpdateCheckRunOptions{
		Name:       CheckName(tier),
		Status:     github.String("completed"),
		Conclusion: github.String(Conclusion(v)),
		Output:     out.gh(),
		Actions:    actionsFor(v),
	}
	if _, _, err := client.Checks.UpdateCheckRun(ctx, owner, repo, id, opts); err != nil {
		return fmt.Errorf("complete check run %d as %s: %w", id, v, err)
	}
	return nil
}

// Conclude creates a run that is already completed (skipped, config error,
// waiting for a maintainer).
func (c Checks) Conclude(ctx context.Context, client *github.Client, owner, repo string, tier Tier, headSHA string, pr int, v Verdict, out Output) (int64, error) {
	opts := github.CreateCheckRunOptions{
		Name:       CheckName(tier),
		HeadSHA:    headSHA,
		Status:     github.String("completed"),
		Conclusion: github.String(Conclusion(v)),
		ExternalID: externalID(pr),
		Output:     out.gh(),
		Actions:    actionsFor(v),
	}
	c.details(&opts.DetailsURL, owner+"/"+repo, headSHA, tier)
	run, _, err := client.Checks.CreateCheckRun(ctx, owner, repo, opts)
	if err != nil {
		return 0, fmt.Errorf("create %s %s check run on %s/%s@%s: %w", v, opts.Name, owner, repo, short(headSHA), err)
	}
	return run.GetID(), nil
}

func (c Checks) details(dst **string, repo, headSHA string, tier Tier) {
	switch {
	case c.Details != nil:
		*dst = github.String(c.Details(repo, headSHA, tier))
	case c.DetailsURL != "":
		*dst = github.String(c.DetailsURL)
	}
}

// actionsFor returns the buttons a concluded run offers: Retest whenever a
// re-measurement could change the outcome, Appeal when a regression blocks or
// warns.
func actionsFor(v Verdict) []*github.CheckRunAction {
	retest := &github.CheckRunAction{Label: "Retest", Description: "Re-run the benchmark on this commit", Identifier: "retest"}
	appeal := &github.CheckRunAction{Label: "Appeal", Description: "Contest this regression", Identifier: "appeal"}
	switch v {
	case VerdictWarning, VerdictEscalated:
		return []*github.CheckRunAction{retest, appeal}
	case VerdictInconclusive, VerdictError, VerdictWaiting:
		return []*github.CheckRunAction{retest}
	}
	return nil
}

func (o Output) gh() *github.CheckRunOutput {
	if o.Title == "" && o.Summary == "" {
		return nil
	}
	out := &github.CheckRunOutput{Title: github.String(o.Title), Summary: github.String(truncate(o.Summary, maxOutput))}
	if o.Text != "" {
		out.Text = github.String(truncate(o.Text, maxOutput))
	}
	return out
}

// truncate keeps s within max characters, saying so at the end.
func truncate(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	const note = "\n\n… (truncated)"
	r := []rune(s)
	return string(r[:max-utf8.RuneCountInString(note)]) + note
}

func externalID(pr int) *string {
	if pr <= 0 {
		return nil
	}
	return github.String(strconv.Itoa(pr))
}

func short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}
