package dispatch

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// What the engine ran with reaches the check: a knob the pull request set
// and the engine ignored is said to have had no effect, with the engine's
// warning, on the check and as a warning annotation on the changed line;
// the prompts the engine ended itself in every head run are named apart
// from those it ended once.
func TestSettingsDiffAndEngineFailuresOnTheCheck(t *testing.T) {
	l := newLifecycle(t)
	kv := result.KnobChange{Knob: "OLLAMA_KV_CACHE_TYPE", File: "inference_engine/ollama.env", Line: 6, Text: "OLLAMA_KV_CACHE_TYPE=q8_0"}
	l.decorate = func(slot agentapi.Slot, r *result.Result) {
		typeK := result.Setting{Name: "type_k", Value: "f16", Source: "log", Evidence: "llama_kv_cache_unified: kv_size = 4096, type_k = 'f16', type_v = 'f16'",
			Knobs: []string{"OLLAMA_KV_CACHE_TYPE"}}
		r.Perfgate.Environment.EngineName, r.Perfgate.Environment.EngineVersion = "ollama", "v0.9.6"
		if slot.Side != agentapi.SideHead {
			r.Perfgate.Settings = &result.EngineSettings{Values: []result.Setting{typeK}}
			return
		}
		typeK.Unsupported = "quantized kv cache requested but flash attention disabled (type=q8_0)"
		r.Perfgate.Settings = &result.EngineSettings{Values: []result.Setting{typeK}, Changes: []result.KnobChange{kv}}
		r.Perfgate.EngineFailures = []result.EngineFailure{{Prompt: 7, Tokens: 31, Words: "nothing: the engine closed the stream"}}
		if slot.Pair == 0 {
			r.Perfgate.EngineFailures = append(r.Perfgate.EngineFailures, result.EngineFailure{Prompt: 3, Tokens: 5, Words: "cut"})
		}
	}
	id := l.requestMerge(headSHA, false)
	l.runPaired(l.claim(), 1.0, 0.005, rand.New(rand.NewPCG(3, 4)))
	c := l.check(id)
	for _, want := range []string{
		"| engine version | ollama v0.9.6 |",
		"this change had no effect on the engine: `OLLAMA_KV_CACHE_TYPE=q8_0` (inference_engine/ollama.env:6) — the engine ran with type_k = `f16` and warned: `quantized kv cache requested but flash attention disabled (type=q8_0)`",
		"#7 (after 31 tokens",
		"every one of the head's",
		"(transient): prompt #3",
	} {
		if !strings.Contains(c.Summary, want) {
			t.Errorf("the check lacks %q:\n%s", want, c.Summary)
		}
	}
	if len(c.Annotations) != 1 {
		t.Fatalf("annotations %v, want one on the changed line", c.Annotations)
	}
	a := c.Annotations[0]
	if a["path"] != kv.File || a["start_line"] != float64(kv.Line) || a["annotation_level"] != "warning" ||
		!strings.Contains(a["message"].(string), "no effect on the engine") {
		t.Errorf("annotation %v", a)
	}
}
