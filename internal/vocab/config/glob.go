package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// PathFilter decides whether a changed file gates a pull request. Its
// patterns are doublestar globs — "**" spans directories, "*", "?" and
// "[…]" work within one, "{a,b}" is either — matched in time linear in the
// pattern and name (file names are chosen by a PR's author). A pattern that
// starts with "!" excludes what it matches. As in .gitignore, the last
// pattern that matches a file decides: ["model/**", "!model/docs/**"]
// gates model/ except its docs.
type PathFilter struct {
	rules []pathRule
}

type pathRule struct {
	pattern string // as written, "!" included
	glob    string
	exclude bool
}

// NewPathFilter compiles patterns; an invalid one is an error (validation
// reports it with its line).
func NewPathFilter(patterns []string) (PathFilter, error) {
	var f PathFilter
	for _, p := range patterns {
		if err := checkGlob(p); err != nil {
			return PathFilter{}, fmt.Errorf("bad glob %q: %w", p, err)
		}
		glob, exclude := strings.CutPrefix(p, "!")
		f.rules = append(f.rules, pathRule{pattern: p, glob: glob, exclude: exclude})
	}
	return f, nil
}

// Decide reports whether name gates the PR, and the pattern that decided
// it ("" when none matched: not gated).
func (f PathFilter) Decide(name string) (gated bool, pattern string) {
	name = strings.TrimPrefix(name, "./")
	for i := len(f.rules) - 1; i >= 0; i-- {
		r := f.rules[i]
		if doublestar.MatchUnvalidated(r.glob, name) {
			return !r.exclude, r.pattern
		}
	}
	return false, ""
}

// Gates reports whether name gates the PR.
func (f PathFilter) Gates(name string) bool {
	g, _ := f.Decide(name)
	return g
}

// Filter compiles the config's paths (validated when parsed).
func (c *Config) Filter() PathFilter {
	f, err := NewPathFilter(c.Paths)
	if err != nil {
		// Parse validated the paths; a hand-built config with a bad glob
		// gates nothing rather than panicking.
		return PathFilter{}
	}
	return f
}

// MatchGlob matches a slash-separated file name against one pattern
// (without "!").
func MatchGlob(pattern, name string) bool {
	return doublestar.MatchUnvalidated(pattern, strings.TrimPrefix(name, "./"))
}

// checkGlob reports a syntax error in a pattern.
func checkGlob(pattern string) error {
	glob, exclude := strings.CutPrefix(pattern, "!")
	if glob == "" {
		return errors.New("empty pattern")
	}
	if exclude && strings.HasPrefix(glob, "!") {
		return errors.New(`"!!" is not a pattern: one "!" excludes what follows`)
	}
	if strings.HasPrefix(glob, "/") {
		return errors.New("paths are relative to the repository root: drop the leading /")
	}
	for _, seg := range strings.Split(glob, "/") {
		if seg != "**" && strings.Contains(seg, "**") {
			// "model/***" would silently mean "model/*": one level only.
			return errors.New(`"**" must be a whole path segment, e.g. "model/**"`)
		}
	}
	if !doublestar.ValidatePattern(glob) {
		return errors.New("unbalanced [ ] or { }, or a trailing \\")
	}
	return nil
}

// checkPaths reports problems of the path list as a whole: a list of only
// exclusions gates nothing, and an exclusion before any pattern it could
// carve from does nothing.
func checkPaths(patterns []string) (problem, hint string) {
	seenInclude := false
	for _, p := range patterns {
		if !strings.HasPrefix(p, "!") {
			seenInclude = true
			continue
		}
		if !seenInclude {
			return fmt.Sprintf("exclusion %q comes before any pattern it could exclude from", p),
				`the last matching pattern decides: list what to gate first, then exclusions, e.g. ["model/**", "!model/docs/**"]`
		}
	}
	return "", ""
}
