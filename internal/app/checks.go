package app

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Verdict is perfgate's judgement of one run, mapped to a check conclusion.
type Verdict string

const (
	VerdictPass          Verdict = "pass"
	VerdictWarning       Verdict = "warning"        // regression, not yet escalated
	VerdictEscalated     Verdict = "escalated"      // unresolved past escalate_after
	VerdictInconclusive  Verdict = "inconclusive"   // too noisy to call
	VerdictSkipped       Verdict = "skipped"        // nothing relevant changed
	VerdictConfigError   Verdict = "config_error"   // .github/perfgate.yml is broken
	VerdictNotConfigured Verdict = "not_configured" // no .github/perfgate.yml
	VerdictWaiting       Verdict = "waiting"        // fork PR waits for a maintainer
	VerdictError         Verdict = "error"          // perfgate itself failed
)

// Conclusion is the check run conclusion for v. For required checks GitHub
// counts neutral and skipped as passing, so a warning is neutral and only an
// escalated regression blocks.
func Conclusion(v Verdict) string {
	switch v {
	case VerdictPass:
		return "success"
	case VerdictWarning, VerdictInconclusive, VerdictNotConfigured:
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

// MaxOutput is GitHub's limit on output.summary and output.text, in
// characters.
const MaxOutput = 65535

// Button is a check run action.
type Button struct {
	Label, Description, Identifier string
}

// Buttons returns the buttons a concluded run offers: Retest whenever a
// re-measurement could change the outcome, Appeal when a regression blocks
// or warns, Approve on a fork's commit that waits for an approval.
func Buttons(v Verdict) []Button {
	retest := Button{Label: "Retest", Description: "Re-run the benchmark on this commit", Identifier: "retest"}
	appeal := Button{Label: "Appeal", Description: "Contest this regression", Identifier: "appeal"}
	approve := Button{Label: "Approve", Description: "Run this fork commit on the runners", Identifier: "approve"}
	switch v {
	case VerdictWarning, VerdictEscalated:
		return []Button{retest, appeal}
	case VerdictInconclusive, VerdictError:
		return []Button{retest}
	case VerdictWaiting:
		return []Button{approve}
	}
	return nil
}

// Truncate keeps s within max characters, saying so at the end.
func Truncate(s string, max int) string { return truncate(s, max) }

func truncate(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	const note = "\n\n… (truncated)"
	r := []rune(s)
	return string(r[:max-utf8.RuneCountInString(note)]) + note
}

// prFromExternalID reads the PR number perfgate put first in a check run's
// external_id ("17" from older versions, "17:<row>.<generation>" now).
func prFromExternalID(id string) (int, bool) {
	head, _, _ := strings.Cut(id, ":")
	n, err := strconv.Atoi(head)
	return n, err == nil && n > 0
}

func short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}
