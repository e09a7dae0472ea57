package config

import (
	"errors"
	"path"
	"strings"
)

// MatchGlob matches a slash-separated file name against a pattern in which
// "**" as a whole segment spans any number of directories (zero included)
// and other segments follow path.Match.
func MatchGlob(pattern, name string) bool {
	return matchSegs(strings.Split(pattern, "/"), strings.Split(strings.TrimPrefix(name, "./"), "/"))
}

func matchSegs(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(name); i++ {
				if matchSegs(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, err := path.Match(pat[0], name[0]); err != nil || !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// checkGlob reports a syntax error in a pattern.
func checkGlob(pattern string) error {
	for _, seg := range strings.Split(pattern, "/") {
		if seg == "**" {
			continue
		}
		if strings.Contains(seg, "**") {
			// "model/***" would silently mean "model/*": one level only.
			return errors.New(`"**" must be a whole path segment, e.g. "model/**"`)
		}
		if _, err := path.Match(seg, ""); err != nil {
			return err
		}
	}
	return nil
}
