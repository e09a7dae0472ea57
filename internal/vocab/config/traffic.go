package config

import (
	"errors"
	"time"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// Sessions is workload.sessions: multi-turn chats whose prompts grow by the
// conversation so far (result.Sessions says how).
type Sessions struct {
	Count     int      `yaml:"count"`
	Turns     int      `yaml:"turns"`
	UserLen   int      `yaml:"user_len"`
	ThinkTime Duration `yaml:"think_time"`
}

// PromptClass is one entry of workload.prompt_mix.
type PromptClass struct {
	Name      string  `yaml:"name"`
	InputLen  int     `yaml:"input_len"`
	OutputLen int     `yaml:"output_len"`
	Weight    float64 `yaml:"weight"`
}

// ModelShare is one entry of workload.models: a model the engine serves
// (server.model, or a LoRA adapter it serves beside it) and its weight.
type ModelShare struct {
	Name   string  `yaml:"name"`
	Weight float64 `yaml:"weight"`
}

// Traffic is the workload's shape as the plan and the result carry it;
// nil for the plain workload.
func (w Workload) Traffic() *result.Traffic {
	var t result.Traffic
	if s := w.Sessions; s != (Sessions{}) {
		t.Sessions = &result.Sessions{Count: s.Count, Turns: s.Turns, UserLen: s.UserLen,
			ThinkTimeMS: float64(s.ThinkTime.D()) / float64(time.Millisecond)}
	}
	for _, c := range w.PromptMix {
		t.PromptMix = append(t.PromptMix, result.PromptClass(c))
	}
	for _, m := range w.Models {
		t.Models = append(t.Models, result.ModelShare(m))
	}
	if !t.Shaped() {
		return nil
	}
	return &t
}

func (d *decoder) validateTraffic(w *Workload) {
	t := w.Traffic()
	if d.set["workload.sessions"] && (t == nil || t.Sessions == nil) {
		// Written but all zero: Traffic() reads that as no sessions.
		t = &result.Traffic{Sessions: &result.Sessions{}}
	}
	if !t.Shaped() {
		return
	}
	var te *result.TrafficError
	if err := t.Check(); errors.As(err, &te) {
		d.errField("workload."+te.Field, te.Msg, "")
		return
	}
	if (t.Sessions != nil || len(t.PromptMix) > 0) && w.Dataset != "random" {
		field := "workload.prompt_mix"
		if t.Sessions != nil {
			field = "workload.sessions"
		}
		d.errField(field, "sessions and a prompt mix write their own prompts", "use dataset: random (a model mix works with any dataset)")
	}
}
