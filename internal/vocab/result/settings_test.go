package result

import (
	"strings"
	"testing"
)

func TestDiffSettings(t *testing.T) {
	t.Parallel()
	fa := Setting{Name: "flash_attn", Value: "0", Source: "log", Evidence: "llama_context: flash_attn    = 0", Knobs: []string{"OLLAMA_FLASH_ATTENTION"}}
	typeK := Setting{Name: "type_k", Value: "f16", Source: "log", Evidence: "type_k = 'f16'", Knobs: []string{"OLLAMA_KV_CACHE_TYPE"}}
	ctx := func(v string) Setting {
		return Setting{Name: "n_ctx_per_seq", Value: v, Source: "log", Evidence: "llama_context: n_ctx_per_seq = " + v, Knobs: []string{"num_ctx"}}
	}
	warned := typeK
	warned.Unsupported = "quantized kv cache requested but flash attention disabled (type=q8_0)"
	kvLine := KnobChange{Knob: "OLLAMA_KV_CACHE_TYPE", File: "inference_engine/ollama.env", Line: 6, Text: "OLLAMA_KV_CACHE_TYPE=q8_0"}
	ctxLine := KnobChange{Knob: "num_ctx", File: "model/Modelfile", Line: 5, Text: "PARAMETER num_ctx 2048"}
	tests := []struct {
		name       string
		base, head *EngineSettings
		changed    []string // settings that differ
		noEffect   []string // sentences' substrings, in order
		effect     []string
	}{
		{"nothing read on one side", nil, &EngineSettings{Values: []Setting{fa}}, nil, nil, nil},
		{"same values, no knob touched", &EngineSettings{Values: []Setting{fa, typeK}}, &EngineSettings{Values: []Setting{fa, typeK}}, nil, nil, nil},
		{"a knob set, the engine warned it off",
			&EngineSettings{Values: []Setting{fa, typeK}},
			&EngineSettings{Values: []Setting{fa, warned}, Changes: []KnobChange{kvLine}},
			nil, []string{"`OLLAMA_KV_CACHE_TYPE=q8_0` (inference_engine/ollama.env:6) — the engine ran with type_k = `f16` and warned: `quantized kv cache requested"}, nil},
		{"a knob set, the value the same on both sides",
			&EngineSettings{Values: []Setting{fa, ctx("1024")}},
			&EngineSettings{Values: []Setting{fa, ctx("1024")}, Changes: []KnobChange{ctxLine}},
			nil, []string{"n_ctx_per_seq = `1024` on both sides; its line: `llama_context: n_ctx_per_seq = 1024`"}, nil},
		{"a knob that took effect",
			&EngineSettings{Values: []Setting{fa, ctx("1024")}},
			&EngineSettings{Values: []Setting{fa, ctx("2048")}, Changes: []KnobChange{ctxLine}},
			[]string{"n_ctx_per_seq"}, nil, []string{"num_ctx"}},
		{"a value that moved with no knob line",
			&EngineSettings{Values: []Setting{ctx("1024")}},
			&EngineSettings{Values: []Setting{ctx("4096")}},
			[]string{"n_ctx_per_seq"}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := DiffSettings(tt.base, tt.head)
			if d.Empty() {
				if len(tt.changed)+len(tt.noEffect)+len(tt.effect) > 0 {
					t.Fatalf("no diff, want %v %v %v", tt.changed, tt.noEffect, tt.effect)
				}
				return
			}
			var changed []string
			for _, c := range d.Changed {
				changed = append(changed, c.Name)
			}
			if strings.Join(changed, ",") != strings.Join(tt.changed, ",") {
				t.Errorf("changed %v, want %v", changed, tt.changed)
			}
			if len(d.NoEffect) != len(tt.noEffect) {
				t.Fatalf("no-effect %+v, want %d", d.NoEffect, len(tt.noEffect))
			}
			for i, want := range tt.noEffect {
				got := d.NoEffect[i].Sentence()
				if !strings.HasPrefix(got, "this change had no effect on the engine: ") || !strings.Contains(got, want) {
					t.Errorf("sentence %q, want one containing %q", got, want)
				}
			}
			if len(d.Effect) != len(tt.effect) {
				t.Fatalf("effect %+v, want %v", d.Effect, tt.effect)
			}
			for i, k := range tt.effect {
				if d.Effect[i].Change.Knob != k || d.Effect[i].Base == d.Effect[i].Value {
					t.Errorf("effect %+v, want knob %s with a base value apart", d.Effect[i], k)
				}
			}
		})
	}
}

func TestFailuresByPrompt(t *testing.T) {
	t.Parallel()
	run := func(f ...EngineFailure) *Result { return &Result{Perfgate: &Section{EngineFailures: f}} }
	words := "the engine closed the stream without a finish reason"
	runs := []*Result{
		run(EngineFailure{Prompt: 7, Tokens: 31, Words: words}, EngineFailure{Prompt: 3, Tokens: 5, Words: words}),
		run(EngineFailure{Prompt: 7, Tokens: 31, Words: words}),
		run(EngineFailure{Prompt: 7, Tokens: 31, Words: words}),
	}
	p := FailuresByPrompt(runs)
	if len(p.Reproducible) != 1 || p.Reproducible[0].Prompt != 7 || p.Reproducible[0].Failed != 3 {
		t.Errorf("reproducible %+v, want prompt 7 in 3 of 3", p.Reproducible)
	}
	if len(p.Transient) != 1 || p.Transient[0].Prompt != 3 {
		t.Errorf("transient %+v, want prompt 3", p.Transient)
	}
	notes := strings.Join(p.Notes("head"), "\n")
	for _, want := range []string{"#7 (after 31 tokens", "every one of the head's 3 runs", "#3 (1 of 3 runs)"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes %q lack %q", notes, want)
		}
	}
	// One run cannot show a failure is reproducible.
	if p := FailuresByPrompt(runs[:1]); len(p.Reproducible) != 0 {
		t.Errorf("one run: reproducible %+v", p.Reproducible)
	}
}
