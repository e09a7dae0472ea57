package config

import (
	"reflect"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

func TestTrafficShapes(t *testing.T) {
	t.Parallel()
	if Default().Workload.Traffic() != nil {
		t.Fatal("the default workload has a traffic shape")
	}
	c, err := Parse(DefaultPath, []byte(`workload:
  sessions: {turns: 5, user_len: 64, think_time: 1500ms}
  prompt_mix:
    - {name: short, input_len: 128, weight: 6}
    - {name: long, input_len: 4096, output_len: 256, weight: 1}
  models:
    - {name: llama-8b, weight: 7}
    - {name: sql-lora, weight: 3}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := &result.Traffic{
		Sessions:  &result.Sessions{Turns: 5, UserLen: 64, ThinkTimeMS: 1500},
		PromptMix: []result.PromptClass{{Name: "short", InputLen: 128, Weight: 6}, {Name: "long", InputLen: 4096, OutputLen: 256, Weight: 1}},
		Models:    []result.ModelShare{{Name: "llama-8b", Weight: 7}, {Name: "sql-lora", Weight: 3}},
	}
	if got := c.Workload.Traffic(); !reflect.DeepEqual(got, want) {
		t.Errorf("traffic %+v, want %+v", got, want)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"workload:\n  sessions:\n    turns: 0\n", "perfgate.yml:3:12: workload.sessions.turns: 0 turns: want 1 to 1000 turns a session"},
		{"workload:\n  sessions: {turns: 3}\n", "workload.sessions.user_len: 0 tokens: every turn after the first adds user text"},
		{"workload:\n  prompt_mix:\n    - {name: short, input_len: 128, weight: 0}\n", "perfgate.yml:3:45: workload.prompt_mix[0].weight: weight 0 must be positive"},
		{"workload:\n  models:\n    - {name: a, weight: 1}\n    - {name: a, weight: 1}\n", `workload.models[1].name: "a" is empty or used twice`},
		{"workload:\n  dataset: sharegpt\n  sessions: {turns: 3, user_len: 8}\n", "workload.sessions: sessions and a prompt mix write their own prompts (use dataset: random"},
		{"workload:\n  sessions: {turns: 3, user_len: 8, think: 1s}\n", `workload.sessions.think: unknown key "think"`},
	} {
		_, err := Parse("perfgate.yml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
