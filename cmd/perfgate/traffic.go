package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// trafficFlags are perfgate bench's traffic-shape flags (.github/perfgate.yml
// writes the same under workload:); the returned function builds the shape
// after parsing, nil when no flag asks for one.
func trafficFlags(fs *flagSet) func() (*result.Traffic, error) {
	sessions := fs.Int("sessions", 0, "multi-turn chat: this many sessions (0 with --turns: --num-prompts / --turns)")
	turns := fs.Int("turns", 0, "multi-turn chat: turns per session; each turn's prompt is the previous prompt, an answer and --user-len new tokens")
	userLen := fs.Int("user-len", 64, "multi-turn chat: new user tokens each turn after the first")
	think := fs.Duration("think-time", 0, "multi-turn chat: pause between an answer and the session's next turn")
	mix := fs.String("prompt-mix", "", `prompt lengths and their weights, NAME:INPUT_LEN[:OUTPUT_LEN]:WEIGHT comma separated, e.g. "short:128:6,medium:1024:3,long:4096:256:1"`)
	models := fs.String("model-mix", "", `models and their weights, NAME:WEIGHT comma separated, e.g. "llama-8b:7,sql-lora:3" (with --sim, the sim serves them all)`)
	return func() (*result.Traffic, error) {
		var t result.Traffic
		if *turns > 0 || *sessions > 0 {
			if *turns < 1 {
				return nil, fmt.Errorf("--sessions needs --turns")
			}
			t.Sessions = &result.Sessions{Count: *sessions, Turns: *turns, UserLen: *userLen, ThinkTimeMS: float64(*think) / float64(time.Millisecond)}
		}
		var err error
		if t.PromptMix, err = parsePromptMix(*mix); err != nil {
			return nil, fmt.Errorf("--prompt-mix: %w", err)
		}
		if t.Models, err = parseModelMix(*models); err != nil {
			return nil, fmt.Errorf("--model-mix: %w", err)
		}
		if !t.Shaped() {
			return nil, nil
		}
		return &t, t.Check()
	}
}

func parsePromptMix(s string) ([]result.PromptClass, error) {
	var out []result.PromptClass
	for _, item := range splitList(s) {
		f := strings.Split(item, ":")
		if len(f) != 3 && len(f) != 4 {
			return nil, fmt.Errorf("%q: want NAME:INPUT_LEN[:OUTPUT_LEN]:WEIGHT", item)
		}
		c := result.PromptClass{Name: f[0]}
		var err error
		if c.InputLen, err = strconv.Atoi(f[1]); err != nil {
			return nil, fmt.Errorf("%q: input length %q is not a whole number", item, f[1])
		}
		if len(f) == 4 {
			if c.OutputLen, err = strconv.Atoi(f[2]); err != nil {
				return nil, fmt.Errorf("%q: output length %q is not a whole number", item, f[2])
			}
		}
		if c.Weight, err = strconv.ParseFloat(f[len(f)-1], 64); err != nil {
			return nil, fmt.Errorf("%q: weight %q is not a number", item, f[len(f)-1])
		}
		out = append(out, c)
	}
	return out, nil
}

func parseModelMix(s string) ([]result.ModelShare, error) {
	var out []result.ModelShare
	for _, item := range splitList(s) {
		i := strings.LastIndexByte(item, ':')
		if i <= 0 {
			return nil, fmt.Errorf("%q: want NAME:WEIGHT", item)
		}
		w, err := strconv.ParseFloat(item[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("%q: weight %q is not a number", item, item[i+1:])
		}
		out = append(out, result.ModelShare{Name: item[:i], Weight: w})
	}
	return out, nil
}

// simAdapters are the model-mix names the built-in sim must serve beside
// its own model.
func simAdapters(t *result.Traffic, simModel string) string {
	if t == nil {
		return ""
	}
	var names []string
	for _, m := range t.Models {
		if m.Name != simModel {
			names = append(names, m.Name)
		}
	}
	return strings.Join(names, ",")
}
