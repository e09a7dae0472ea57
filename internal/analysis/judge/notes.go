package judge

import "github.com/perfgate/perfgate/internal/vocab/result"

// settingsOf is what the engine ran with in the side's last run that
// recorded it (the head side's carries the pull request's knob lines).
func settingsOf(runs []*result.Result) *result.EngineSettings {
	for i := len(runs) - 1; i >= 0; i-- {
		if r := runs[i]; r != nil && r.Perfgate != nil && r.Perfgate.Settings != nil {
			return r.Perfgate.Settings
		}
	}
	return nil
}

// engineFailureNotes name the prompts the engine itself ended early, on
// each side: those that failed in every run apart from transient ones.
func engineFailureNotes(base, head []*result.Result) []string {
	var out []string
	out = append(out, result.FailuresByPrompt(base).Notes("base")...)
	return append(out, result.FailuresByPrompt(head).Notes("head")...)
}

// envOf is the environment the first run that records one ran in.
func envOf(runs []*result.Result) *result.Environment {
	for _, r := range runs {
		if r.Perfgate != nil {
			e := r.Perfgate.Environment
			return &e
		}
	}
	return nil
}
