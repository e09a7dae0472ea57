package config

import (
	"fmt"
	"strings"
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

// suggest returns `did you mean "x"?` for the closest candidate within a
// few edits, or "" when nothing is close.
func suggest(got string, candidates []string) string {
	best, bestD := "", 1<<30
	for _, c := range candidates {
		if d := editDistance(got, c); d < bestD || (d == bestD && c < best) {
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

// editDistance is the Levenshtein distance.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
