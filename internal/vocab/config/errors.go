package config

import (
	"fmt"
	"strings"

	"github.com/perfgate/perfgate/internal/vocab/suggest"
)

// FieldError is one problem in a config file, located to the line.
type FieldError struct {
	File         string
	Line, Column int
	Field        string // dotted path, e.g. tiers.merge.metrics.tpot_p99
	Message      string
	Hint         string // how to fix it; may be empty
}

func (e FieldError) String() string {
	s := fmt.Sprintf("%s:%d:%d: %s: %s", e.File, e.Line, e.Column, e.Field, e.Message)
	if e.Field == "" {
		s = fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Message)
	}
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}

// ValidationError is every problem found in one file.
type ValidationError struct {
	Errors []FieldError
}

// Error prints one "file:line:col: field: message (hint)" per line.
func (v *ValidationError) Error() string {
	lines := make([]string, len(v.Errors))
	for i, e := range v.Errors {
		lines[i] = e.String()
	}
	return strings.Join(lines, "\n")
}

// didYouMean returns `did you mean "x"?` for the closest candidate within a
// few edits, or "" when nothing is close.
func didYouMean(got string, candidates []string) string {
	best, bestD := "", 1<<30
	for _, c := range candidates {
		if d := suggest.Distance(got, c); d < bestD || (d == bestD && c < best) {
			best, bestD = c, d
		}
	}
	limit := len(got) / 3
	if limit < 2 {
		limit = 2
	}
	if best == "" || bestD > limit {
		return ""
	}
	return fmt.Sprintf("did you mean %q?", best)
}
