package result

import (
	"fmt"
	"sort"
	"strings"
)

// EngineSettings is what the engine actually ran with, read from the
// engine itself (its API and its start-up log), not from the
// configuration that asked for it. A knob the engine ignores or refuses
// shows here with the value it really used.
type EngineSettings struct {
	Values []Setting `json:"values,omitempty"`
	// Changes are the knobs the pull request's files set: lines the head's
	// checkout adds against the base's that name a knob of Values. The
	// agent of an interleaved job, which holds both checkouts, records
	// them on the head side's runs.
	Changes []KnobChange `json:"knob_changes,omitempty"`
}

// Setting is one effective value.
type Setting struct {
	Name  string `json:"name"`  // the engine's own name: "flash_attn", "type_k", "num_ctx"
	Value string `json:"value"` // as the engine reported it
	// Source is where it was read: "log" (the start-up log), or an API
	// path ("/api/show", "/metrics").
	Source string `json:"source"`
	// Evidence is the line the value was read from, verbatim.
	Evidence string `json:"evidence,omitempty"`
	// Knobs are the configuration names that set it (an environment
	// variable, a Modelfile parameter, a command-line flag), so a changed
	// line can be tied to the value it was meant to change.
	Knobs []string `json:"knobs,omitempty"`
	// Unsupported is the engine's own warning that it ignored the knob.
	Unsupported string `json:"unsupported,omitempty"`
}

// KnobChange is a line of the pull request that sets a knob.
type KnobChange struct {
	Knob string `json:"knob"`
	File string `json:"file"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

// Get returns the setting named name.
func (s *EngineSettings) Get(name string) (Setting, bool) {
	if s == nil {
		return Setting{}, false
	}
	for _, v := range s.Values {
		if v.Name == name {
			return v, true
		}
	}
	return Setting{}, false
}

// Knobs lists every knob name any setting answers to.
func (s *EngineSettings) Knobs() []string {
	if s == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, v := range s.Values {
		for _, k := range v.Knobs {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}

// SettingsDiff is the base/head comparison the check shows beside the
// verdict: every effective value that differs, and every knob the pull
// request set that the engine did not act on.
type SettingsDiff struct {
	Changed  []SettingChange `json:"changed,omitempty"`
	NoEffect []KnobEffect    `json:"no_effect,omitempty"`
	// Effect is a knob the pull request set whose effective value did
	// change, with the line that set it.
	Effect []KnobEffect `json:"effect,omitempty"`
}

// SettingChange is one effective value that differs between the sides.
type SettingChange struct {
	Name     string `json:"name"`
	Base     string `json:"base"`
	Head     string `json:"head"`
	Source   string `json:"source"`
	Evidence string `json:"evidence,omitempty"` // the head's line
}

// KnobEffect is a changed line and the engine's evidence about it.
type KnobEffect struct {
	Change   KnobChange `json:"change"`
	Setting  string     `json:"setting"`
	Value    string     `json:"value"`              // the head's effective value
	Base     string     `json:"base,omitempty"`     // the base's, where it differs
	Evidence string     `json:"evidence,omitempty"` // the engine's line
	// Unsupported: Evidence is the engine's warning that it ignored the knob.
	Unsupported bool `json:"unsupported,omitempty"`
	source      string
}

// Empty reports whether the diff has nothing to show.
func (d *SettingsDiff) Empty() bool {
	return d == nil || len(d.Changed)+len(d.NoEffect)+len(d.Effect) == 0
}

// DiffSettings compares the settings the base and the head ran with. A
// knob the head's files set (head.Changes) whose setting has the same
// value on both sides, or that the engine warned it does not support, had
// no effect on the engine; one whose setting moved is listed as an
// effect. Nil when either side was not read.
func DiffSettings(base, head *EngineSettings) *SettingsDiff {
	if base == nil || head == nil {
		return nil
	}
	d := &SettingsDiff{}
	for _, h := range head.Values {
		b, ok := base.Get(h.Name)
		if ok && b.Value != h.Value {
			d.Changed = append(d.Changed, SettingChange{Name: h.Name, Base: b.Value, Head: h.Value, Source: h.Source, Evidence: h.Evidence})
		}
	}
	for _, c := range head.Changes {
		if e, moved, ok := knobOutcome(base, head, c); ok && moved {
			d.Effect = append(d.Effect, e)
		} else if ok {
			d.NoEffect = append(d.NoEffect, e)
		}
	}
	if d.Empty() {
		return nil
	}
	return d
}

// knobOutcome is what one changed line did, told by the settings it
// answers to: the engine's warning that it ignored the knob outranks
// everything (no effect); else a setting that moved is the effect (a value
// from the log, the engine's own, before the API's echo of the config);
// else the values are the same on both sides (no effect). ok is false
// when no setting answers to the knob.
func knobOutcome(base, head *EngineSettings, c KnobChange) (e KnobEffect, moved, ok bool) {
	var same, effect *KnobEffect
	for _, h := range head.Values {
		if !hasKnob(h.Knobs, c.Knob) {
			continue
		}
		b, found := base.Get(h.Name)
		cur := KnobEffect{Change: c, Setting: h.Name, Value: h.Value, Evidence: h.Evidence}
		switch {
		case h.Unsupported != "":
			cur.Evidence, cur.Unsupported = h.Unsupported, true
			return cur, false, true
		case found && b.Value == h.Value:
			if same == nil {
				same = &cur
			}
		case found:
			cur.Base = b.Value
			if effect == nil || (effect.source != "log" && h.Source == "log") {
				cur.source = h.Source
				effect = &cur
			}
		}
	}
	if effect != nil {
		return *effect, true, true
	}
	if same != nil {
		return *same, false, true
	}
	return KnobEffect{}, false, false
}

// Sentence is the check's line for a knob that did nothing.
func (e KnobEffect) Sentence() string {
	out := fmt.Sprintf("this change had no effect on the engine: `%s` (%s:%d) — the engine ran with %s = `%s`",
		strings.TrimSpace(e.Change.Text), e.Change.File, e.Change.Line, e.Setting, e.Value)
	if e.Unsupported {
		return out + " and warned: `" + e.Evidence + "`"
	}
	out += " on both sides"
	if e.Evidence != "" {
		out += "; its line: `" + e.Evidence + "`"
	}
	return out
}

// EffectSentence is the check's line for a knob that did take effect.
func (e KnobEffect) EffectSentence() string {
	return fmt.Sprintf("`%s` (%s:%d) took effect: %s `%s` → `%s` (the engine's line: `%s`)",
		strings.TrimSpace(e.Change.Text), e.Change.File, e.Change.Line, e.Setting, e.Base, e.Value, e.Evidence)
}

func hasKnob(knobs []string, k string) bool {
	for _, x := range knobs {
		if x == k {
			return true
		}
	}
	return false
}
