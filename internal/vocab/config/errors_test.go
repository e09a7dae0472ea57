package config

import (
	"errors"
	"testing"
)

// A YAML syntax error points at the line that breaks the file: yaml.v3
// names the line before it, or where the enclosing block began, or none.
func TestSyntaxErrorPositions(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, doc string
		line, col int
	}{
		{"unterminated flow sequence", "paths:\n  - a\nnotify: [x\n", 3, 1},
		{"unterminated flow, more after", "paths: [a\nserver: {}\ntiers: {}\n", 1, 1},
		{"tab indentation", "tiers:\n\tmerge: {}\n", 2, 1},
		{"key in a plain value", "tiers: merge: {}\npaths: []\n", 1, 1},
		{"key dedented into nothing", "tiers:\n  merge: {}\n quick: {}\npaths: []\n", 3, 2},
		{"stray list item", "paths: []\n- a\nserver: {}\n", 2, 1},
		{"key after list items", "paths:\n  - a\n  server: {}\n", 3, 3},
		{"unclosed quote", "paths: []\nnotify: \"x\nserver: {}\n", 2, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("perfgate.yml", []byte(tt.doc))
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Errors) != 1 {
				t.Fatalf("Parse = %v", err)
			}
			e := ve.Errors[0]
			if e.Line != tt.line || e.Column != tt.col {
				t.Errorf("at %d:%d, want %d:%d (%s)", e.Line, e.Column, tt.line, tt.col, e)
			}
		})
	}
}

func TestOverlaps(t *testing.T) {
	t.Parallel()
	errs := []FieldError{{Field: "tiers.merge.prompts"}, {Field: "paths[2]"}}
	for _, tt := range []struct {
		field string
		want  bool
	}{
		{"tiers.merge.prompts", true}, {"tiers.merge", true}, {"tiers.merge.prompts.x", true}, {"paths", true},
		{"tiers.merge.pairs", false}, {"tiers.merge.prompts_x", false}, {"paths[1]", false},
	} {
		if got := overlaps(tt.field, errs); got != tt.want {
			t.Errorf("overlaps(%q) = %v", tt.field, got)
		}
	}
}
