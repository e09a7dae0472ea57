package result

import (
	"fmt"
	"math"
	"strings"
)

// Traffic is a workload's shape beyond one prompt length and one model:
// multi-turn chat sessions whose prompts grow by reusing the conversation
// so far, a weighted mix of prompt lengths, and a weighted mix of models
// served by one engine. Nil or zero fields are the plain workload. The
// bench client draws every choice from the run's seed, so a shape is the
// same work on base and head, run after run.
type Traffic struct {
	Sessions  *Sessions     `json:"sessions,omitempty"`
	PromptMix []PromptClass `json:"prompt_mix,omitempty"`
	Models    []ModelShare  `json:"models,omitempty"`
	// Counts is what a run drew: measured requests per prompt class
	// ("class:short") and per model ("model:llama-8b"), and sessions
	// ("sessions"). Written by the client, not read.
	Counts map[string]int `json:"counts,omitempty"`
}

// Sessions are multi-turn chats, as vLLM's benchmarks/multi_turn and Locust
// users play them: each session's turns go one after another, and turn t's
// prompt is turn t−1's prompt, the answer to it and UserLen tokens of new
// user text, so every turn after the first finds its conversation's prefix
// in the engine's prefix cache.
type Sessions struct {
	// Count sessions of Turns turns each; Count 0 is the run's prompts
	// divided by Turns (at least one).
	Count int `json:"count,omitempty"`
	Turns int `json:"turns"`
	// UserLen is the new user text of every turn after the first, in
	// tokens; the first turn's prompt is the workload's input length (or
	// its prompt class's).
	UserLen int `json:"user_len"`
	// ThinkTimeMS is the pause between an answer and the session's next
	// turn; 0 sends it at once.
	ThinkTimeMS float64 `json:"think_time_ms,omitempty"`
}

// PromptClass is one length of the prompt mix ("short", 128 tokens, weight 6).
type PromptClass struct {
	Name     string `json:"name"`
	InputLen int    `json:"input_len"`
	// OutputLen overrides the workload's output length for the class; 0
	// keeps it.
	OutputLen int     `json:"output_len,omitempty"`
	Weight    float64 `json:"weight"`
}

// ModelShare is one model of the model mix and its share of the requests.
type ModelShare struct {
	Name   string  `json:"name"`
	Weight float64 `json:"weight"`
}

// Shaped reports whether t asks for anything beyond the plain workload.
func (t *Traffic) Shaped() bool {
	return t != nil && (t.Sessions != nil || len(t.PromptMix) > 0 || len(t.Models) > 0)
}

// TrafficError is a traffic shape's problem: the field as perfgate.yml
// names it under workload: ("sessions.turns", "prompt_mix[1].weight") and
// what is wrong with it.
type TrafficError struct{ Field, Msg string }

func (e *TrafficError) Error() string { return e.Field + ": " + e.Msg }

// Check reports the first problem of a traffic shape as a *TrafficError.
func (t *Traffic) Check() error {
	if t == nil {
		return nil
	}
	bad := func(field, format string, a ...any) error {
		return &TrafficError{Field: field, Msg: fmt.Sprintf(format, a...)}
	}
	if s := t.Sessions; s != nil {
		switch {
		case s.Turns < 1 || s.Turns > 1000:
			return bad("sessions.turns", "%d turns: want 1 to 1000 turns a session", s.Turns)
		case s.Count < 0:
			return bad("sessions.count", "%d sessions: want a positive number, or 0 for prompts / turns", s.Count)
		case s.UserLen < 1 && s.Turns > 1:
			return bad("sessions.user_len", "%d tokens: every turn after the first adds user text; want at least 1", s.UserLen)
		case s.ThinkTimeMS < 0 || math.IsNaN(s.ThinkTimeMS):
			return bad("sessions.think_time", "must not be negative")
		}
	}
	seen := map[string]bool{}
	for i, c := range t.PromptMix {
		f := fmt.Sprintf("prompt_mix[%d]", i)
		switch {
		case c.Name == "" || seen["class:"+c.Name]:
			return bad(f+".name", "%q is empty or used twice: name each class once, e.g. short, medium, long", c.Name)
		case c.InputLen < 1:
			return bad(f+".input_len", "%d tokens: must be positive", c.InputLen)
		case c.OutputLen < 0:
			return bad(f+".output_len", "%d tokens: must not be negative (0 keeps the workload's)", c.OutputLen)
		case !(c.Weight > 0) || math.IsInf(c.Weight, 0):
			return bad(f+".weight", "weight %g must be positive", c.Weight)
		}
		seen["class:"+c.Name] = true
	}
	for i, m := range t.Models {
		f := fmt.Sprintf("models[%d]", i)
		switch {
		case m.Name == "" || seen["model:"+m.Name]:
			return bad(f+".name", "%q is empty or used twice: name each served model once", m.Name)
		case !(m.Weight > 0) || math.IsInf(m.Weight, 0):
			return bad(f+".weight", "weight %g must be positive", m.Weight)
		}
		seen["model:"+m.Name] = true
	}
	return nil
}

// Signature words the shape without what a run drew, for comparing the
// loads of two runs: "" for the plain workload.
func (t *Traffic) Signature() string {
	if !t.Shaped() {
		return ""
	}
	var b strings.Builder
	if s := t.Sessions; s != nil {
		fmt.Fprintf(&b, "sessions %d×%d turns, +%d user tokens, think %gms; ", s.Count, s.Turns, s.UserLen, s.ThinkTimeMS)
	}
	for _, c := range t.PromptMix {
		fmt.Fprintf(&b, "%s %d→%d ×%g; ", c.Name, c.InputLen, c.OutputLen, c.Weight)
	}
	for _, m := range t.Models {
		fmt.Fprintf(&b, "model %s ×%g; ", m.Name, m.Weight)
	}
	return strings.TrimSuffix(b.String(), "; ")
}
