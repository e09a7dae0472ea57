package result

import (
	"fmt"
	"sort"
	"strings"

	"github.com/perfgate/perfgate/internal/vocab/figure"
)

// EngineFailure is a request the engine itself ended early: its stream
// closed cleanly, with tokens but without a finish reason or a last event
// (Ollama's `done: false`, no counts). No proxy or crash cut it — the
// body ended as the engine's handler returned — so the failure is the
// engine's, and it recurs for the same prompt.
type EngineFailure struct {
	Prompt int    `json:"prompt"` // the prompt's index in the run's dataset
	Tokens int    `json:"tokens"` // tokens streamed before the end
	Words  string `json:"words"`  // what the engine said, or that it said nothing
}

// PromptFailures sorts one side's runs' engine failures by prompt: the
// prompts that failed in every run (reproducible: the engine's answer to
// that prompt) and those that failed in some runs only (transient).
type PromptFailures struct {
	Runs         int
	Reproducible []PromptFailure
	Transient    []PromptFailure
}

// PromptFailure is one prompt's record over the runs.
type PromptFailure struct {
	Prompt int
	Failed int    // runs in which it failed
	Tokens int    // tokens before the end, in the last failing run
	Words  string // the engine's words, in the last failing run
}

// FailuresByPrompt collects the engine failures of runs by prompt.
func FailuresByPrompt(runs []*Result) PromptFailures {
	out := PromptFailures{}
	byPrompt := map[int]*PromptFailure{}
	for _, r := range runs {
		if r == nil || r.Perfgate == nil {
			continue
		}
		out.Runs++
		seen := map[int]bool{}
		for _, f := range r.Perfgate.EngineFailures {
			p := byPrompt[f.Prompt]
			if p == nil {
				p = &PromptFailure{Prompt: f.Prompt}
				byPrompt[f.Prompt] = p
			}
			if !seen[f.Prompt] {
				seen[f.Prompt] = true
				p.Failed++
			}
			p.Tokens, p.Words = f.Tokens, f.Words
		}
	}
	for _, p := range byPrompt {
		if out.Runs > 1 && p.Failed == out.Runs {
			out.Reproducible = append(out.Reproducible, *p)
		} else {
			out.Transient = append(out.Transient, *p)
		}
	}
	sort.Slice(out.Reproducible, func(i, j int) bool { return out.Reproducible[i].Prompt < out.Reproducible[j].Prompt })
	sort.Slice(out.Transient, func(i, j int) bool { return out.Transient[i].Prompt < out.Transient[j].Prompt })
	return out
}

// Notes are the summary's lines: the reproducible prompts first, apart
// from the transient ones.
func (p PromptFailures) Notes(side string) []string {
	var out []string
	if len(p.Reproducible) > 0 {
		var parts []string
		for _, f := range p.Reproducible {
			parts = append(parts, fmt.Sprintf("#%d (after %d tokens: %s)", f.Prompt, f.Tokens, f.Words))
		}
		out = append(out, fmt.Sprintf("the engine ended %s prompt%s early in every one of the %s's %d runs (reproducible, the engine's answer to the prompt, not a cut stream): %s",
			count(len(p.Reproducible)), figure.Plural(len(p.Reproducible), "", "s"), side, p.Runs, strings.Join(parts, "; ")))
	}
	if len(p.Transient) > 0 {
		var parts []string
		for _, f := range p.Transient {
			parts = append(parts, fmt.Sprintf("#%d (%d of %d runs)", f.Prompt, f.Failed, p.Runs))
		}
		out = append(out, fmt.Sprintf("the engine ended some requests early in some of the %s's runs only (transient): prompt %s", side, strings.Join(parts, ", ")))
	}
	return out
}

func count(n int) string {
	if n == 1 {
		return "one"
	}
	return fmt.Sprint(n)
}
